/**
 * Every generation dialect picks a LoRA adapter by the request's `model`, as chat/completions/responses do: Anthropic
 * Messages (and its count_tokens) and Ollama's /api/chat and /api/generate (Ollama's name rules: `sql` is
 * `sql:latest`, any case). The engine request carries the adapter's name, the answer names the adapter, the base
 * model's name runs without one, and an unknown name is still each dialect's 404. In process, on the fake
 * orchestrator (it records the engine requests; the engine side of adapters is test/lora).
 */
import { describe, expect, test } from "bun:test";
import { LoraAdapters } from "../../src/server/lora-routes.ts";
import { withRequestLogging } from "../../src/server/request-logger.ts";
import { createFakeOrchestrator } from "./fake-orchestrator.ts";
import { testServer, type Json } from "./helpers.ts";

const engine = { loadLora: async () => "not used", unloadLora: async () => "not used" };
const served = () => testServer({ lora: new LoraAdapters(engine, "fake-model", false, [{ name: "sql", path: "/adapters/sql.gguf", baseModelName: null }, { name: "Poet", path: "/adapters/poet.gguf", baseModelName: null }]) });
const messages = [{ role: "user", content: "hi" }];

describe("LoRA adapters picked by model on Anthropic's and Ollama's routes", () => {
  test("Anthropic Messages: the adapter runs and is named in the answer; the base runs without; unknown is a 404", async () => {
    const s = served();
    const r = await s.call("POST", "/v1/messages", { model: "sql", max_tokens: 4, messages });
    expect(r.status).toBe(200);
    expect(((await r.json()) as Json).model).toBe("sql");
    const base = await s.call("POST", "/v1/messages", { model: "fake-model", max_tokens: 4, messages });
    expect(base.status).toBe(200);
    expect(s.fake.requests.map((q) => q.loraName)).toEqual(["sql", undefined]);
    const unknown = await s.call("POST", "/v1/messages", { model: "nope", max_tokens: 4, messages });
    expect(unknown.status).toBe(404);
    expect(s.fake.requests.length).toBe(2);
    const count = await s.call("POST", "/v1/messages/count_tokens", { model: "sql", messages });
    expect(count.status).toBe(200);
    expect(((await count.json()) as Json).input_tokens).toBeGreaterThan(0);
  });

  test("Ollama /api/chat and /api/generate: the adapter's name (with Ollama's tag and case rules) runs it", async () => {
    const s = served();
    const chat = await s.call("POST", "/api/chat", { model: "sql", messages, stream: false, options: { num_predict: 3 } });
    expect(chat.status).toBe(200);
    expect(((await chat.json()) as Json).model).toBe("sql:latest");
    const gen = await s.call("POST", "/api/generate", { model: "poet:latest", prompt: "hi", stream: false, options: { num_predict: 3 } });
    expect(gen.status).toBe(200);
    expect(((await gen.json()) as Json).model).toBe("Poet:latest");
    const base = await s.call("POST", "/api/generate", { model: "fake-model", prompt: "hi", stream: false, options: { num_predict: 3 } });
    expect(base.status).toBe(200);
    expect(s.fake.requests.map((q) => q.loraName)).toEqual(["sql", "Poet", undefined]);
    const unknown = await s.call("POST", "/api/chat", { model: "sql:v2", messages, stream: false });
    expect([unknown.status, ((await unknown.json()) as Json).error]).toEqual([404, "model 'sql:v2' not found"]);
  });

  test("--enable-log-requests: a request with an adapter logs its LoRARequest as vLLM's repr, the base model's None", async () => {
    const lines: string[] = [];
    const lora = new LoraAdapters(engine, "fake-model", false, [{ name: "sql", path: "/adapters/sql.gguf", baseModelName: null }, { name: "poet", path: "/adapters/poet.gguf", baseModelName: "fake-base" }]);
    const s = testServer({ lora, orchestrator: withRequestLogging(createFakeOrchestrator(), (l) => lines.push(l), null, false, (name) => lora.card(name)) });
    expect((await s.call("POST", "/v1/chat/completions", { model: "poet", messages, max_tokens: 2 })).status).toBe(200);
    expect((await s.call("POST", "/v1/messages", { model: "sql", max_tokens: 2, messages })).status).toBe(200);
    expect((await s.call("POST", "/v1/completions", { model: "fake-model", prompt: "hi", max_tokens: 2 })).status).toBe(200);
    const tails = lines.map((l) => l.slice(l.indexOf("lora_request: ")));
    expect(tails).toEqual([
      "lora_request: LoRARequest(lora_name='poet', lora_int_id=2, lora_path='/adapters/poet.gguf', base_model_name='fake-base', tensorizer_config_dict=None, load_inplace=False).",
      "lora_request: LoRARequest(lora_name='sql', lora_int_id=1, lora_path='/adapters/sql.gguf', base_model_name=None, tensorizer_config_dict=None, load_inplace=False).",
      "lora_request: None.",
    ]);
  });

  test("without --enable-lora the adapter names are unknown models", async () => {
    const s = testServer();
    expect((await s.call("POST", "/v1/messages", { model: "sql", max_tokens: 4, messages })).status).toBe(404);
    expect((await s.call("POST", "/api/chat", { model: "sql", messages, stream: false })).status).toBe(404);
    expect(s.fake.requests.length).toBe(0);
  });
});
