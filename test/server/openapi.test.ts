/**
 * /openapi.json as code generators read it: valid OpenAPI under a real validator (@readme/openapi-parser),
 * every operation with a summary, a JSON request schema where it takes a body, and a described response with a schema
 * for each answer; examples name the served model; --disable-fastapi-docs removes /docs and /openapi.json.
 */
import { describe, expect, test } from "bun:test";
import { validate } from "@readme/openapi-parser";
import { makeDeprecationGate } from "../../src/metrics/deprecation.ts";
import { MetricsRecorder } from "../../src/metrics/recorder.ts";
import { metricsRoute } from "../../src/server/metrics-route.ts";
import { testServer } from "./helpers.ts";

function withMetrics() {
  const gate = makeDeprecationGate("0.2.0", null);
  if (!gate.ok) throw new Error(gate.error);
  const recorder = new MetricsRecorder({ modelName: "fake-model", maxModelLen: 512, logStats: true, enableMfuMetrics: false, deprecation: gate.value, processMetrics: false });
  return testServer({ metricsRoute: metricsRoute(recorder) });
}

type Json = Record<string, any>;

async function documentOf(s: ReturnType<typeof testServer>): Promise<Json> {
  const res = await s.call("GET", "/openapi.json");
  expect(res.status).toBe(200);
  return (await res.json()) as Json;
}

describe("/openapi.json", () => {
  test("is valid OpenAPI (no errors from @readme/openapi-parser)", async () => {
    const doc = await documentOf(withMetrics());
    const result = await validate(structuredClone(doc) as Parameters<typeof validate>[0]);
    expect(result.valid ? [] : result.errors.map((e) => e.message.split("\n")[0])).toEqual([]);
    expect(doc.openapi).toBe("3.0.3");
    // TypeBox's JSON-Schema spellings that OpenAPI 3.0 does not have are gone
    const text = JSON.stringify(doc);
    expect(text).not.toContain('"type":"null"');
    expect(text).not.toContain("patternProperties");
  });

  test("every operation: a summary, a JSON request schema for bodies, a described response with a schema", async () => {
    const doc = await documentOf(withMetrics());
    const problems: string[] = [];
    const ops = Object.entries(doc.paths as Json).flatMap(([path, item]) => Object.entries(item as Json).map(([method, op]) => ({ path, method, op: op as Json })));
    expect(ops.map((o) => `${o.method} ${o.path}`)).toEqual(expect.arrayContaining(["post /v1/chat/completions", "post /v1/completions", "post /v1/embeddings", "post /pooling", "post /score", "post /v1/rerank", "get /v1/models", "post /tokenize", "post /detokenize", "post /invocations", "get /metrics", "get /health", "get /version", "get /load"]));
    for (const { path, method, op } of ops) {
      const name = `${method} ${path}`;
      if (typeof op.summary !== "string" || op.summary === "") problems.push(`${name}: no summary`);
      if (method === "post" && !["/ping"].includes(path)) {
        const content = op.requestBody?.content ?? {};
        if (Object.keys(content).join() !== "application/json" || content["application/json"].schema === undefined) problems.push(`${name}: no JSON request schema (${Object.keys(content).join()})`);
      }
      for (const [status, response] of Object.entries(op.responses ?? {}) as [string, Json][]) {
        if (!response.description) problems.push(`${name} ${status}: no description`);
        for (const [media, body] of Object.entries(response.content ?? {}) as [string, Json][]) if (body.schema === undefined) problems.push(`${name} ${status} ${media}: no schema`);
      }
      if (!Object.keys(op.responses ?? {}).some((s) => s.startsWith("2"))) problems.push(`${name}: no 2xx response`);
    }
    expect(problems).toEqual([]);
    // /invocations takes either body it routes by
    expect(doc.paths["/invocations"].post.requestBody.content["application/json"].schema.oneOf).toHaveLength(5);
  });

  test("POST /invocations: one body schema per route it forwards to (messages, prompt, input, text_1, documents)", async () => {
    const doc = await documentOf(testServer());
    const bodies = doc.paths["/invocations"].post.requestBody.content["application/json"].schema.oneOf as Json[];
    // each member is the target route's own schema, so it names the field /invocations routes by
    const fields = ["messages", "prompt", "input", "text_1", "documents"];
    expect(bodies).toHaveLength(fields.length);
    fields.forEach((field, i) => expect(bodies[i]!.properties[field]).toBeDefined());
  });

  test("GET /v1/models/{model}: documented (the route takes any name, slashes included)", async () => {
    const s = testServer({ servedModelName: "qwen-edge" });
    const doc = await documentOf(s);
    const op = doc.paths["/v1/models/{model}"]?.get;
    expect(op).toBeDefined();
    expect(op.parameters).toEqual([expect.objectContaining({ name: "model", in: "path", required: true, schema: { type: "string" } })]);
    expect(op.security).toEqual([{ bearerAuth: [] }]);
    expect(op.responses["200"].content["application/json"].example.id).toBe("qwen-edge");
    expect(op.responses["200"].content["application/json"].schema.properties.id).toEqual({ type: "string" });
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(["200", "401", "404"]));
    // and the route answers as documented
    expect(((await (await s.call("GET", "/v1/models/qwen-edge")).json()) as Json).id).toBe("qwen-edge");
  });

  test("examples name the served model, its path and its context length", async () => {
    const doc = await documentOf(testServer({ servedModelName: "qwen-edge", modelPath: "/models/qwen.gguf" }));
    const text = JSON.stringify(doc);
    expect(text).not.toContain("stories260K");
    const models = doc.paths["/v1/models"].get.responses["200"].content["application/json"].example;
    expect(models.data[0]).toMatchObject({ id: "qwen-edge", root: "/models/qwen.gguf" });
    expect(doc.paths["/v1/chat/completions"].post.responses["200"].content["application/json"].example.model).toBe("qwen-edge");
  });

  test("--disable-fastapi-docs: /docs and /openapi.json are gone, the API stays", async () => {
    const s = testServer({ disableDocs: true });
    expect((await s.call("GET", "/openapi.json")).status).toBe(404);
    expect((await s.call("GET", "/docs")).status).toBe(404);
    expect((await s.call("GET", "/v1/models")).status).toBe(200);
  });
});
