/**
 * /openapi.json as code generators need it: the document @elysiajs/swagger builds from the routes' `t` schemas,
 * made valid OpenAPI 3.0.3 (checked by @readme/openapi-parser in test/server/openapi.test.ts) and complete:
 * - TypeBox's JSON-Schema spellings that 3.0 lacks: `anyOf [X, {type: "null"}]` -> X with `nullable: true`,
 *   `patternProperties` (t.Record) -> `additionalProperties`, `const` -> a one-value `enum`;
 * - request bodies: JSON only (the server refuses other media types with 400, as vLLM does);
 * - every response has a description, and a schema (inferred from its example where the route gave only an example);
 * - the routes without documented answers get theirs from ROUTE_DOCS (health, version, load, metrics, invocations);
 *   /invocations takes the body of every route it forwards to; GET /v1/models/{model} (a wildcard route) is added;
 * - examples name the served model, its path and context length instead of the defaults written in the sources.
 * @example const doc = openApiDocument(raw, { servedModelName: "qwen", modelPath: "/m/qwen.gguf", maxModelLen: 4096 });
 */
import { STATUS_CODES } from "node:http";
import { INVOCATION_ROUTES } from "./openai/invocations.ts";
import { MODEL_RESPONSES } from "./openai/response-docs.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

export interface OpenApiFacts {
  readonly servedModelName: string;
  readonly modelPath: string;
  readonly maxModelLen: number;
  /** --root-path: the prefix a proxy strips before requests reach fennec (the document's server URL) */
  readonly rootPath?: string;
}

/** The names the sources' examples use, replaced by the served model's. */
const EXAMPLE_MODEL = "stories260K";
const EXAMPLE_MODEL_PATH = "embedded:stories260K";
const EXAMPLE_MAX_MODEL_LEN = 512;

const isObject = (v: Json | undefined): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** One schema (and everything under it) in OpenAPI 3.0's dialect. */
function toOpenApi30Schema(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(toOpenApi30Schema);
  if (!isObject(schema)) return schema;
  let out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    // examples are data, not schemas
    out[key] = key === "example" || key === "examples" || key === "default" || key === "enum" ? value : toOpenApi30Schema(value);
  }
  for (const key of ["anyOf", "oneOf"] as const) {
    const list = out[key];
    if (!Array.isArray(list)) continue;
    const rest = list.filter((s) => !(isObject(s) && s.type === "null"));
    if (rest.length === list.length) continue;
    delete out[key];
    if (rest.length === 1 && isObject(rest[0])) out = { ...rest[0], ...out };
    else if (rest.length > 0) out[key] = rest;
    out.nullable = true;
  }
  if (Array.isArray(out.type)) {
    const types = out.type.filter((t) => t !== "null");
    if (types.length < out.type.length) out.nullable = true;
    if (types.length === 1) out.type = types[0]!;
    else { out.anyOf = types.map((t) => ({ type: t })); delete out.type; }
  }
  if (out.type === "null") { delete out.type; out.nullable = true; }
  if (isObject(out.patternProperties)) {
    const schemas = Object.values(out.patternProperties);
    out.additionalProperties = schemas.length === 1 ? schemas[0]! : {};
    delete out.patternProperties;
  }
  if ("const" in out) { out.enum = [out.const!]; delete out.const; }
  return out;
}

/** A schema for an example value (for responses that only had an example). */
function inferSchema(example: Json): JsonObject {
  if (example === null) return { nullable: true };
  if (Array.isArray(example)) return { type: "array", items: example.length > 0 ? inferSchema(example[0]!) : {} };
  if (typeof example === "object") {
    return { type: "object", properties: Object.fromEntries(Object.entries(example).map(([k, v]) => [k, inferSchema(v)])) };
  }
  if (typeof example === "number") return { type: Number.isInteger(example) ? "integer" : "number" };
  return { type: typeof example as "string" | "boolean" };
}

/** Replaces the sources' model facts inside examples with the served model's. */
function servedExamples(value: Json, facts: OpenApiFacts): Json {
  if (value === EXAMPLE_MODEL) return facts.servedModelName;
  if (value === EXAMPLE_MODEL_PATH) return facts.modelPath;
  if (typeof value === "string") return value.split(`"${EXAMPLE_MODEL}"`).join(JSON.stringify(facts.servedModelName));
  if (Array.isArray(value)) return value.map((v) => servedExamples(v, facts));
  if (!isObject(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === "max_model_len" && v === EXAMPLE_MAX_MODEL_LEN ? facts.maxModelLen : servedExamples(v, facts)]));
}

/** Rewrites every `example` (and `examples`) in the document. */
function rewriteExamples(node: Json, facts: OpenApiFacts): Json {
  if (Array.isArray(node)) return node.map((n) => rewriteExamples(n, facts));
  if (!isObject(node)) return node;
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, k === "example" || k === "examples" ? servedExamples(v, facts) : rewriteExamples(v, facts)]));
}

const json = (schema: JsonObject, example: Json): JsonObject => ({ "application/json": { schema, example } });

/** What the routes without documented answers return (the handlers in health.ts, load.ts, metrics-route.ts, ...). */
const ROUTE_DOCS: Readonly<Record<string, { summary?: string; responses: JsonObject; requestBody?: "invocations" }>> = {
  "get /health": { responses: { 200: { description: "The engine is alive (empty body)." }, 503: { description: "The engine died: the server is shutting down." } } },
  "get /ping": { responses: { 200: { description: "The engine is alive (empty body), as /health." }, 503: { description: "The engine died." } } },
  "post /ping": { responses: { 200: { description: "The engine is alive (empty body), as /health." }, 503: { description: "The engine died." } } },
  "get /version": { responses: { 200: { description: "The server's version.", content: json({ type: "object", properties: { version: { type: "string" } }, required: ["version"] }, { version: "0.2.0" }) } } },
  "get /load": { responses: { 200: { description: "Generation requests in flight (counted with --enable-server-load-tracking, else 0).", content: json({ type: "object", properties: { server_load: { type: "integer", minimum: 0 } }, required: ["server_load"] }, { server_load: 0 }) } } },
  "get /metrics": {
    responses: { 200: { description: "vLLM's Prometheus series in the text exposition format.", content: { "text/plain": { schema: { type: "string" }, example: "# HELP vllm:num_requests_running Number of requests in model execution batches.\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"stories260K\",engine=\"0\"} 0.0\n" } } } },
  },
  "post /invocations": { requestBody: "invocations", responses: {} },
};

function operations(doc: JsonObject): [string, string, JsonObject][] {
  const out: [string, string, JsonObject][] = [];
  for (const [path, item] of Object.entries(isObject(doc.paths) ? doc.paths : {})) {
    if (!isObject(item)) continue;
    for (const [method, op] of Object.entries(item)) if (isObject(op)) out.push([path, method, op]);
  }
  return out;
}

export function openApiDocument(raw: unknown, facts: OpenApiFacts): JsonObject {
  const doc = toOpenApi30Schema(structuredClone(raw) as Json) as JsonObject;
  doc.openapi = "3.0.3";
  if (facts.rootPath) doc.servers = [{ url: facts.rootPath }];
  const ops = operations(doc);
  const opOf = (method: string, path: string) => ops.find(([p, m]) => p === path && m === method)?.[2];
  for (const [path, method, op] of ops) {
    const extra = ROUTE_DOCS[`${method} ${path}`];
    if (extra?.summary && op.summary === undefined) op.summary = extra.summary;
    if (extra?.requestBody === "invocations") {
      // the body of each route /invocations forwards to (invocations.ts's table), among the routes this server has
      const bodySchema = (o: JsonObject | undefined): Json | undefined => (isObject(o?.requestBody) && isObject(o.requestBody.content) && isObject(o.requestBody.content["application/json"]) ? o.requestBody.content["application/json"].schema : undefined);
      const bodies = INVOCATION_ROUTES.map((r) => bodySchema(opOf("post", r.path))).filter((b): b is Json => b !== undefined);
      op.requestBody = { required: true, content: { "application/json": { schema: { oneOf: bodies } } } };
      const chat = opOf("post", "/v1/chat/completions");
      op.responses = structuredClone(isObject(chat?.responses) ? chat.responses : {});
    }
    if (isObject(op.requestBody) && isObject(op.requestBody.content)) {
      const content = op.requestBody.content;
      for (const type of Object.keys(content)) if (type !== "application/json") delete content[type];
    }
    const responses: JsonObject = isObject(op.responses) ? op.responses : {};
    if (extra !== undefined) for (const [status, response] of Object.entries(extra.responses)) responses[status] = response;
    for (const [status, response] of Object.entries(responses)) {
      if (!isObject(response)) continue;
      if (typeof response.description !== "string" || response.description === "") response.description = STATUS_CODES[Number(status)] ?? "Response";
      if (!isObject(response.content)) continue;
      for (const media of Object.values(response.content)) {
        if (isObject(media) && media.schema === undefined) media.schema = typeof media.example === "string" ? { type: "string" } : inferSchema(media.example ?? null);
      }
    }
    op.responses = responses;
  }
  addModelRoute(doc);
  return rewriteExamples(doc, facts) as JsonObject;
}

/**
 * GET /v1/models/{model}: the route is a wildcard (a served name may hold slashes), which the swagger plugin leaves
 * out of its document; it is written here as OpenAI's spec names it.
 */
function addModelRoute(doc: JsonObject): void {
  const paths = isObject(doc.paths) ? doc.paths : null;
  const list = paths !== null && isObject(paths["/v1/models"]) ? paths["/v1/models"].get : undefined;
  if (paths === null || !isObject(list)) return;
  const responses = structuredClone(MODEL_RESPONSES) as unknown as JsonObject;
  for (const response of Object.values(responses)) {
    if (!isObject(response) || !isObject(response.content)) continue;
    for (const media of Object.values(response.content)) if (isObject(media) && media.schema === undefined) media.schema = inferSchema(media.example ?? null);
  }
  paths["/v1/models/{model}"] = {
    get: {
      operationId: "getV1ModelsByModel", tags: list.tags ?? ["OpenAI"], summary: "Retrieve one served model by any of its names",
      ...(list.security !== undefined ? { security: list.security } : {}),
      parameters: [{ name: "model", in: "path", required: true, description: "The served model name or one of its aliases.", schema: { type: "string" } }],
      responses,
    },
  };
}
