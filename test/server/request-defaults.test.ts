/**
 * Server-side request defaults: --served-model-name aliases, --generation-config /
 * --override-generation-config sampling defaults for omitted fields, --max-logprobs, several --api-key; through the
 * app on the fake orchestrator.
 */
import { describe, expect, test } from "bun:test";
import { serveConfig } from "../../src/command-line/serve-config.ts";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { testServer } from "./helpers.ts";

type Json = Record<string, any>;

describe("request defaults", () => {
  test("an alias of --served-model-name is served; answers name the first; /v1/models lists each", async () => {
    const s = testServer({ servedModelName: "first", servedModelAliases: ["second"] });
    const res = await s.call("POST", "/v1/completions", { model: "second", prompt: "a", max_tokens: 2 });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Json).model).toBe("first");
    expect((await s.call("POST", "/v1/completions", { model: "third", prompt: "a", max_tokens: 2 })).status).toBe(404);
    expect((((await (await s.call("GET", "/v1/models")).json()) as Json).data as Json[]).map((m) => m.id)).toEqual(["first", "second"]);
  });

  test("generation defaults fill omitted fields only: max_new_tokens -> max_tokens, temperature", async () => {
    const s = testServer({ generationDefaults: { max_new_tokens: 3, temperature: 0 } });
    const seen: number[] = [];
    const generate = s.fake.generate.bind(s.fake);
    (s.fake as { generate: typeof generate }).generate = (request, signal) => { seen.push(request.sampling.temperature); return generate(request, signal); };
    const omitted = (await (await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] })).json()) as Json;
    expect(omitted.usage.completion_tokens).toBe(3);
    const given = (await (await s.call("POST", "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 5, temperature: 0.7 })).json()) as Json;
    expect(given.usage.completion_tokens).toBe(5);
    expect(seen).toEqual([0, 0.7]);
  });

  test("--max-logprobs caps logprobs with vLLM's message", async () => {
    const s = testServer({ maxLogprobs: 2 });
    const res = await s.call("POST", "/v1/completions", { prompt: "a", max_tokens: 2, logprobs: 3 });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.message).toContain("Requested sample logprobs of 3, which is greater than max allowed: 2");
    expect((await s.call("POST", "/v1/completions", { prompt: "a", max_tokens: 2, logprobs: 2 })).status).toBe(200);
  });

  test("several --api-key: each one opens /v1, anything else is 401", async () => {
    const s = testServer({ apiKey: "k1", apiKeys: ["k1", "k2"] });
    for (const [key, status] of [["k1", 200], ["k2", 200], ["k3", 401]] as const) {
      expect((await s.call("GET", "/v1/models", undefined, { authorization: `Bearer ${key}` })).status).toBe(status);
    }
  });

  test("the flags: --override-generation-config over --generation-config, bad JSON or an unknown key is one line", () => {
    const config = (argv: string[]) => { const o = parseCommandArgs("serve", argv); if (!o.ok) throw new Error(o.error); return serveConfig(o.value); };
    expect(config(["--override-generation-config", '{"temperature": 0.5}'])).toMatchObject({ ok: true, value: { server: { generationDefaults: { temperature: 0.5 } } } });
    // a key vLLM does not apply would be accepted and ignored: refused, naming it
    expect(config(["--override-generation-config", '{"temperature": 0.5, "unknown": 1}'])).toMatchObject({ ok: false, error: expect.stringContaining("--override-generation-config: unknown key unknown") });
    expect(config(["--override-generation-config", "{temperature"])).toMatchObject({ ok: false, error: expect.stringContaining("--override-generation-config must be a JSON object") });
    expect(config(["--generation-config", "/nonexistent"])).toMatchObject({ ok: false, error: expect.stringContaining("cannot read /nonexistent/generation_config.json") });
    expect(config(["--api-key", "a", "b", "--served-model-name", "x", "y"])).toMatchObject({ ok: true, value: { server: { apiKey: "a", apiKeys: ["a", "b"], servedModelName: "x", servedModelAliases: ["y"] } } });
  });
});
