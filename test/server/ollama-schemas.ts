/**
 * JSON schemas of Ollama's response records, written from ollama api/types.go (ChatResponse, GenerateResponse,
 * Message, ToolCall, Metrics, ProgressResponse, ListResponse, ProcessResponse, ShowResponse, EmbedResponse) and
 * docs/api.md: every stream line and every body the tests read is checked against them (no extra fields, the
 * durations non-negative integers). `checkOllama(kind, value)` throws naming the first mismatch.
 */
import Ajv from "ajv";

const ns = { type: "integer", minimum: 0 };
const metrics = { total_duration: ns, load_duration: ns, prompt_eval_count: ns, prompt_eval_duration: ns, eval_count: ns, eval_duration: ns };
const toolCall = {
  type: "object", additionalProperties: false, required: ["function"],
  properties: { id: { type: "string", pattern: "^call_[a-z0-9]{8}$" }, function: { type: "object", additionalProperties: false, required: ["name", "arguments"], properties: { index: { type: "integer" }, name: { type: "string" }, arguments: { type: "object" } } } },
};
const logprob = {
  type: "object", required: ["token", "logprob"],
  properties: { token: { type: "string" }, logprob: { type: "number" }, bytes: { anyOf: [{ type: "array", items: { type: "integer" } }, { type: "null" }] }, top_logprobs: { type: "array" } },
};
const common = { model: { type: "string" }, created_at: { type: "string", format: "date-time" }, done: { type: "boolean" }, done_reason: { enum: ["stop", "length", "load", "unload"] }, logprobs: { type: "array", items: logprob }, ...metrics };
const message = {
  type: "object", additionalProperties: false, required: ["role", "content"],
  properties: { role: { const: "assistant" }, content: { type: "string" }, thinking: { type: "string" }, tool_calls: { type: "array", items: toolCall } },
};
const details = {
  type: "object", additionalProperties: false, required: ["format", "family", "parameter_size", "quantization_level"],
  properties: { parent_model: { type: "string" }, format: { type: "string" }, family: { type: "string" }, families: { type: "array", items: { type: "string" } }, parameter_size: { type: "string" }, quantization_level: { type: "string" } },
};

/** a done record carries done_reason; a partial one does not (and no metrics) */
const doneRule = {
  if: { properties: { done: { const: true } } },
  then: { required: ["done_reason"] },
  else: { not: { anyOf: [{ required: ["done_reason"] }, { required: ["total_duration"] }, { required: ["eval_count"] }] } },
};

export const OLLAMA_SCHEMAS = {
  chat: { type: "object", additionalProperties: false, required: ["model", "created_at", "message", "done"], properties: { ...common, message }, ...doneRule },
  generate: {
    type: "object", additionalProperties: false, required: ["model", "created_at", "response", "done"],
    properties: { ...common, response: { type: "string" }, thinking: { type: "string" }, context: { type: "array", items: { type: "integer" } }, tool_calls: { type: "array", items: toolCall } }, ...doneRule,
  },
  error: { type: "object", additionalProperties: false, required: ["error"], properties: { error: { type: "string", minLength: 1 } } },
  progress: { type: "object", additionalProperties: false, required: ["status"], properties: { status: { type: "string" }, digest: { type: "string", pattern: "^sha256:" }, total: { type: "integer" }, completed: { type: "integer" } } },
  tags: {
    type: "object", additionalProperties: false, required: ["models"],
    properties: { models: { type: "array", items: { type: "object", additionalProperties: false, required: ["name", "model", "modified_at", "size", "digest", "details"], properties: { name: { type: "string" }, model: { type: "string" }, modified_at: { type: "string", format: "date-time" }, size: { type: "integer" }, digest: { type: "string", pattern: "^[0-9a-f]{64}$" }, details, capabilities: { type: "array", items: { type: "string" } } } } } },
  },
  ps: {
    type: "object", additionalProperties: false, required: ["models"],
    properties: { models: { type: "array", items: { type: "object", additionalProperties: false, required: ["name", "model", "size", "digest", "details", "expires_at", "size_vram"], properties: { name: { type: "string" }, model: { type: "string" }, size: { type: "integer" }, digest: { type: "string" }, details, expires_at: { type: "string", format: "date-time" }, size_vram: { type: "integer" }, context_length: { type: "integer" } } } } },
  },
  show: {
    type: "object", additionalProperties: false, required: ["modelfile", "parameters", "template", "details", "model_info", "capabilities"],
    properties: { license: { type: "string" }, modelfile: { type: "string" }, parameters: { type: "string" }, template: { type: "string" }, system: { type: "string" }, details, model_info: { type: "object" }, tensors: { type: "array" }, capabilities: { type: "array", items: { type: "string" } }, modified_at: { type: "string", format: "date-time" } },
  },
  embed: { type: "object", additionalProperties: false, required: ["model", "embeddings"], properties: { model: { type: "string" }, embeddings: { type: "array", items: { type: "array", items: { type: "number" } } }, ...metrics } },
} as const;

export type OllamaKind = keyof typeof OLLAMA_SCHEMAS;

const ajv = new Ajv({ allErrors: false, strict: false });
ajv.addFormat("date-time", { validate: (s: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(s) && !Number.isNaN(Date.parse(s)) });
const validators = Object.fromEntries(Object.entries(OLLAMA_SCHEMAS).map(([k, s]) => [k, ajv.compile(s)]));

export function checkOllama(kind: OllamaKind, value: unknown): void {
  const validate = validators[kind]!;
  if (!validate(value)) throw new Error(`not an Ollama ${kind} record: ${ajv.errorsText(validate.errors)} in ${JSON.stringify(value).slice(0, 400)}`);
}

/** Every line of an NDJSON body, parsed, each checked against `kind` (an error line against the error schema). */
export async function ndjsonRecords(response: Response, kind: OllamaKind): Promise<Record<string, any>[]> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const text = await response.text();
  if (!text.endsWith("\n")) throw new Error(`an NDJSON body ends with a newline: ${JSON.stringify(text.slice(-80))}`);
  return text.split("\n").slice(0, -1).map((line) => {
    const record = JSON.parse(line);
    checkOllama("error" in record ? "error" : kind, record);
    return record;
  });
}
