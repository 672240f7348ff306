/**
 * /openapi.json's view of Ollama's routes (documentation only: the handlers read and check the bodies themselves, so
 * that every refusal is Ollama's `{"error": "..."}`): a request schema per body, and an example of each answer, from
 * ollama docs/api.md.
 */
type Json = Record<string, unknown>;

const str = (description: string) => ({ type: "string", description });
const bool = (description: string) => ({ type: "boolean", description });
const any = (description: string) => ({ description });

const COMMON = {
  model: str("A served name, in Ollama's name[:tag] form (the default tag is latest)."),
  stream: bool("NDJSON stream of records (default true), or one JSON with false."),
  format: any('"json", or a JSON schema the answer must follow.'),
  options: { type: "object", description: "Ollama's options (num_predict, temperature, top_k, top_p, min_p, typical_p, repeat_last_n, repeat_penalty, presence_penalty, frequency_penalty, mirostat, mirostat_tau, mirostat_eta, seed, stop, num_ctx; the runner keys at their automatic values only)." },
  keep_alive: any('A number of seconds or a duration ("5m", "-1" = forever); 0 unloads the model after the request, and the next request loads it again.'),
  think: any('true/false, or "low", "medium", "high", "max" (needs --reasoning-parser).'),
  logprobs: bool("Log probabilities of the generated tokens."),
  top_logprobs: { type: "integer", minimum: 0, maximum: 20, description: "Alternatives per token with logprobs." },
};

const body = (properties: Json, required: readonly string[] = ["model"]) => ({
  requestBody: { required: true, content: { "application/json": { schema: { type: "object", required, properties } } } },
});

const ok = (description: string, example: unknown, media = "application/json") => ({ 200: { description, content: { [media]: { example } } } });
const ERRORS = {
  400: { description: "Ollama's error object", content: { "application/json": { example: { error: 'option "temperature" must be of type float' } } } },
  404: { description: "Ollama's error object", content: { "application/json": { example: { error: "model 'llama3.2' not found" } } } },
};

const at = "2026-01-01T00:00:00.000Z";
const done = { done: true, done_reason: "stop", total_duration: 5_000_000, prompt_eval_count: 6, prompt_eval_duration: 1_000_000, eval_count: 5, eval_duration: 3_000_000 };
const details = { parent_model: "", format: "gguf", family: "llama", families: ["llama"], parameter_size: "260.0K", quantization_level: "Q8_0" };

export const OLLAMA_DOCS = {
  chat: {
    ...body({ ...COMMON, messages: { type: "array", items: { type: "object", description: "{role, content, thinking?, tool_calls?, tool_name?}" } }, tools: { type: "array", items: { type: "object" }, description: "Functions the model may call (needs --tool-call-parser)." } }),
    responses: { ...ok("One record, or NDJSON records ending with done: true.", { model: "stories:latest", created_at: at, message: { role: "assistant", content: "Once upon a time" }, ...done }), ...ERRORS },
  },
  generate: {
    ...body({ ...COMMON, prompt: str("The prompt (empty: the load answer)."), system: str("A system message for the template."), raw: bool("Send the prompt as it is, without the template.") }),
    responses: { ...ok("One record, or NDJSON records ending with done: true.", { model: "stories:latest", created_at: at, response: "Once upon a time", ...done }), ...ERRORS },
  },
  embed: {
    ...body({ model: COMMON.model, input: any("A string or a list of strings."), truncate: bool("Keep what fits (default true)."), dimensions: { type: "integer" }, keep_alive: COMMON.keep_alive }),
    responses: { ...ok("L2-normalised vectors in input order.", { model: "embedder:latest", embeddings: [[0.1, -0.2, 0.3]], total_duration: 2_000_000, prompt_eval_count: 4 }), ...ERRORS },
  },
  embeddings: {
    ...body({ model: COMMON.model, prompt: str("The text."), keep_alive: COMMON.keep_alive }),
    responses: { ...ok("One vector, not normalised.", { embedding: [0.5, -1.2, 0.8] }), ...ERRORS },
  },
  tags: { responses: ok("The served model under each of its names.", { models: [{ name: "stories:latest", model: "stories:latest", modified_at: at, size: 1_185_376, digest: "0".repeat(64), details, capabilities: ["completion"] }] }) },
  ps: { responses: ok("The served model and the keep-alive expiry.", { models: [{ name: "stories:latest", model: "stories:latest", size: 1_185_376, digest: "0".repeat(64), details, expires_at: at, size_vram: 0, context_length: 256 }] }) },
  show: {
    ...body({ model: COMMON.model, verbose: bool("Long metadata arrays in full.") }),
    responses: { ...ok("Details, template and GGUF metadata.", { license: "", modelfile: "FROM /models/stories.gguf\n", parameters: "", template: "", details, model_info: { "general.architecture": "llama" }, tensors: [], capabilities: ["completion"], modified_at: at }), ...ERRORS },
  },
  pull: {
    ...body({ model: str("org/repo[:QUANT] or hf.co/org/repo[:QUANT]."), stream: COMMON.stream }),
    responses: ok("NDJSON progress records ending with success.", { status: "success" }),
  },
  copy: { ...body({ source: str("A served name."), destination: str("The new name.") }, ["source", "destination"]), responses: { 200: { description: "Copied (empty body)." }, ...ERRORS } },
  delete: { ...body({ model: str("A name added with /api/copy.") }), responses: { 200: { description: "Deleted (empty body)." }, ...ERRORS } },
  version: { responses: ok("fennec's version.", { version: "0.2.0" }) },
} satisfies Record<string, Json>;
