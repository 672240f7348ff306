/**
 * Every failure the engine side can report for a request reaches the client as an OpenAI error with vLLM's status:
 * the client's input 400, the server's own failure 500, no room right now 503 (server/generation/engine-errors.ts).
 * Through the HTTP layer on the fake orchestrator, which throws each error the way the real front end does; and a
 * scan of the engine, front end and pipeline sources, so a new error code cannot ship without its row.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { EngineDeadError, EngineRequestError, type EncodeOutput, type EncodeRequest } from "../../src/frontend/orchestrator.ts";
import { PipelineRequestError } from "../../src/pipeline/stage-pipeline.ts";
import { ENGINE_ERROR_KINDS } from "../../src/server/generation/engine-errors.ts";
import { readSse, testServer, type Json } from "./helpers.ts";

const chat = { messages: [{ role: "user", content: "Hi" }], max_tokens: 4 };

/** What each code means for the client, written out here (not read from the table under test). */
const EXPECTED: readonly (readonly [code: string, status: number, type: string])[] = [
  ["duplicate_request_id", 400, "BadRequestError"],
  ["empty_prompt", 400, "BadRequestError"],
  ["invalid_sampling_params", 400, "BadRequestError"],
  ["invalid_token_id", 400, "BadRequestError"],
  ["context_length", 400, "BadRequestError"],
  ["pooling_model", 400, "BadRequestError"],
  ["generative_model", 400, "BadRequestError"],
  ["invalid_priority", 400, "BadRequestError"],
  ["invalid_request", 400, "BadRequestError"],
  ["invalid_kv_transfer_params", 400, "BadRequestError"],
  ["kv_transfer_params_unsupported", 400, "BadRequestError"],
  ["structured_outputs_unavailable", 400, "BadRequestError"],
  ["invalid_multimodal", 400, "BadRequestError"],
  ["kv_cache_too_small", 400, "BadRequestError"],
  ["invalid_grammar", 400, "BadRequestError"],
  ["grammar_dead_end", 400, "BadRequestError"],
  ["grammar_error", 500, "InternalServerError"],
  ["grammar_rejected", 500, "InternalServerError"],
  ["kv_load_failed", 500, "InternalServerError"],
  ["kv_handoff", 500, "InternalServerError"],
  ["kv_cache_full", 503, "ServiceUnavailableError"],
  ["engine_sleeping", 503, "ServiceUnavailableError"],
  ["lora_not_found", 404, "NotFoundError"],
  ["lora_disabled", 400, "BadRequestError"],
  ["lora_load_failed", 500, "InternalServerError"],
];

async function expectError(res: Response, status: number, type: string, message: RegExp): Promise<void> {
  expect(res.status).toBe(status);
  const body = (await res.json()) as Json;
  expect(body).toEqual({ error: { message: expect.stringMatching(message), type, param: null, code: status } });
}

const failing = (error: Error) => () => (async function* () { throw error; })();

describe("engine request errors -> OpenAI errors", () => {
  test.each(EXPECTED)("%s -> %d %s (chat, and completions streaming)", async (code, status, type) => {
    const s = testServer();
    s.fake.generate = failing(new EngineRequestError(code, `the engine says ${code}`));
    await expectError(await s.call("POST", "/v1/chat/completions", chat), status, type, new RegExp(`^the engine says ${code}$`));
    // refused before the first chunk: a JSON error, not a 200 stream
    await expectError(await s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 4, stream: true }), status, type, new RegExp(`the engine says ${code}`));
    // a mapped error is an answer, not a bug: no "internal error" line for the operator
    expect(s.logs.filter((l) => l.startsWith("internal error"))).toEqual([]);
  });

  test("the table and this test list the same codes", () => {
    expect(Object.keys(ENGINE_ERROR_KINDS).sort()).toEqual(EXPECTED.map(([code]) => code).sort());
  });

  test("every code the engine, front end and pipeline raise has a row, and every row a code", () => {
    const root = join(import.meta.dir, "../../src");
    const raised = new Set<string>();
    for (const folder of ["engine", "frontend", "pipeline"]) {
      for (const file of readdirSync(join(root, folder), { recursive: true }) as string[]) {
        if (!file.endsWith(".ts")) continue;
        for (const line of readFileSync(join(root, folder, file), "utf8").split("\n")) {
          // the code argument only (messages quote JSON of their own): `code: "x"`, failLate(id, "x"), and
          // EngineRequestError's first argument, which may choose between two codes
          const codeArgs = [
            ...[...line.matchAll(/\bcode: ("[a-z_]+")/g)].map((m) => m[1]!),
            ...[...line.matchAll(/failLate\([^,]+, ("[a-z_]+")/g)].map((m) => m[1]!),
            ...[...line.matchAll(/EngineRequestError\(([^,]+),/g)].map((m) => m[1]!),
          ];
          for (const arg of codeArgs) for (const m of arg.matchAll(/"([a-z]+(?:_[a-z]+)+)"/g)) raised.add(m[1]!);
        }
      }
    }
    // no code without a row, and no row for a code nothing raises any more
    expect([...raised].sort()).toEqual(Object.keys(ENGINE_ERROR_KINDS).sort());
  });

  test("a code without a row is a refusal of the request: 400", async () => {
    const s = testServer();
    s.fake.generate = failing(new EngineRequestError("some_new_refusal", "refused for a new reason"));
    await expectError(await s.call("POST", "/v1/chat/completions", chat), 400, "BadRequestError", /^refused for a new reason$/);
  });

  test("embeddings map the same way (encode)", async () => {
    const s = testServer();
    let next: Error = new EngineRequestError("kv_cache_full", "no free KV blocks");
    Object.assign(s.fake, {
      pooler: { poolingType: "LAST", normalize: true, dimensions: null, hiddenSize: 4, matryoshka: null, source: "gguf" },
      encode: async (_r: EncodeRequest): Promise<EncodeOutput> => { throw next; },
    });
    await expectError(await s.call("POST", "/v1/embeddings", { input: "ab" }), 503, "ServiceUnavailableError", /^no free KV blocks$/);
    next = new EngineRequestError("context_length", "too long to embed");
    await expectError(await s.call("POST", "/v1/embeddings", { input: "ab" }), 400, "BadRequestError", /^too long to embed$/);
  });
});

describe("the other engine-side failures", () => {
  test("a multi-stage pipeline losing a request -> 500 naming the failure, not an unnamed bug", async () => {
    const s = testServer();
    s.fake.generate = failing(new PipelineRequestError("edge 0->1: truncated KV payload"));
    await expectError(await s.call("POST", "/v1/chat/completions", chat), 500, "InternalServerError", /^Internal server error: edge 0->1: truncated KV payload$/);
    await expectError(await s.call("POST", "/v1/completions", { prompt: "Hi", stream: true }), 500, "InternalServerError", /edge 0->1/);
    expect(s.logs.filter((l) => l.startsWith("internal error"))).toEqual([]);
  });

  test("a dead engine -> 500 (vLLM EngineDeadError)", async () => {
    const s = testServer();
    s.fake.generate = failing(new EngineDeadError("worker exited"));
    await expectError(await s.call("POST", "/v1/completions", { prompt: "Hi" }), 500, "InternalServerError", /^Internal server error: the engine is not running\.$/);
  });

  test("a request the engine ended with finish reason error -> 500 (vLLM GenerationError)", async () => {
    const s = testServer({}, { failAfterTokens: 2 });
    await expectError(await s.call("POST", "/v1/chat/completions", chat), 500, "InternalServerError", /^Internal server error$/);
  });

  test("a request aborted by the server shutting down -> 503", async () => {
    const s = testServer({}, { stepDelayMs: 20 });
    const pending = s.call("POST", "/v1/completions", { prompt: "Hi", max_tokens: 50 });
    await Bun.sleep(30);
    s.shutdown.abort();
    await expectError(await pending, 503, "ServiceUnavailableError", /shutting down/);
  });

  test("an unexpected exception stays a plain 500 and one log line", async () => {
    const s = testServer();
    s.fake.generate = failing(new RangeError("a bug"));
    await expectError(await s.call("POST", "/v1/chat/completions", chat), 500, "InternalServerError", /^Internal server error$/);
    expect(s.logs.filter((l) => l.startsWith("internal error: RangeError: a bug"))).toHaveLength(1);
  });

  test("mid-stream, an engine error is an error event with its status, then [DONE] (vLLM's stream error path)", async () => {
    const s = testServer();
    const real = s.fake.generate;
    s.fake.generate = (request, signal) => (async function* () {
      let numOutputs = 0;
      for await (const output of real(request, signal)) {
        yield output;
        if (++numOutputs === 2) throw new EngineRequestError("grammar_rejected", "Unexpected: grammar rejected tokens [7]");
      }
    })();
    const res = await s.call("POST", "/v1/chat/completions", { ...chat, max_tokens: 8, stream: true });
    expect(res.status).toBe(200);
    const events = await readSse(res);
    expect(events.at(-1)).toBe("[DONE]");
    expect(events.at(-2)).toEqual({ error: { message: "Unexpected: grammar rejected tokens [7]", type: "InternalServerError", param: null, code: 500 } });
  });
});
