/**
 * docs/dialects.md against the code: every request field the Responses schema declares and every row of Anthropic's
 * field table is named in the page, every test file the page cites exists; and the rows whose fate no other test
 * showed, shown here (app.handle on the fake engine): Responses `truncation` and built-in tool items, Anthropic's
 * `chat_template_kwargs`, `cache_salt`, `service_tier` and `container`, Ollama's `_debug_render_only`.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ResponsesRequest } from "../../src/server/openai/responses/request-schema.ts";
import { MESSAGE_FIELDS } from "../../src/server/anthropic/message-fields.ts";
import { testServer, type Json } from "./helpers.ts";

const ROOT = join(import.meta.dir, "..", "..");
const DOC = readFileSync(join(ROOT, "docs", "dialects.md"), "utf8");
const section = (from: string, to: string) => DOC.slice(DOC.indexOf(from), DOC.indexOf(to));

describe("docs/dialects.md", () => {
  test("names every Responses request field", () => {
    const text = section("## Responses API", "## Anthropic Messages");
    expect(Object.keys(ResponsesRequest.properties).filter((f) => !text.includes(`\`${f}\``))).toEqual([]);
  });

  test("names every Anthropic field, refused ones as refused", () => {
    const text = section("## Anthropic Messages", "## Ollama");
    expect(MESSAGE_FIELDS.map((f) => f.name).filter((f) => !text.includes(`\`${f}\``))).toEqual([]);
    for (const f of MESSAGE_FIELDS.filter((m) => m.fate === "refused")) {
      const row = text.split("\n").find((l) => l.includes(`\`${f.name}\``))!;
      expect(row).toContain("refused");
    }
  });

  test("every test file it cites exists", () => {
    const cited = new Set([...DOC.matchAll(/(?<![\w/])((?:server|e2e|engine|helpers)\/[a-z0-9-]+\.(?:test\.)?ts)\b/g)].map((m) => m[1]!));
    expect(cited.size).toBeGreaterThan(10);
    expect([...cited].filter((p) => !existsSync(join(ROOT, "test", p)))).toEqual([]);
  });
});

describe("rows shown here", () => {
  test("Responses truncation: auto keeps the end of a prompt over the context, disabled refuses it", async () => {
    const s = testServer({}, { maxModelLen: 256 });
    const long = "a ".repeat(400);
    const cut = await s.call("POST", "/v1/responses", { model: "fake-model", input: long, max_output_tokens: 2, truncation: "auto" });
    expect(cut.status).toBe(200);
    expect(s.fake.requests[0]!.promptTokenIds.length).toBeLessThanOrEqual(256);
    expect((await s.call("POST", "/v1/responses", { model: "fake-model", input: long, max_output_tokens: 2, truncation: "disabled" })).status).toBe(400);
  });

  test("Responses: a built-in tool item in the input is a 400 naming it", async () => {
    const s = testServer();
    const res = await s.call("POST", "/v1/responses", { model: "fake-model", input: [{ type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "x" } }] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error).toMatchObject({ param: "input[0].type" });
  });

  const ask = (extra: Json) => ({ model: "fake-model", max_tokens: 2, messages: [{ role: "user", content: "hi" }], ...extra });

  test("Anthropic chat_template_kwargs reach the template; cache_salt the engine; service_tier changes nothing", async () => {
    const s = testServer({}, { chatTemplate: "{% for m in messages %}{{ m.content }}{% endfor %}[{{ flavour }}]" });
    expect((await s.call("POST", "/v1/messages", ask({ chat_template_kwargs: { flavour: "mint" }, cache_salt: "tenant-1", service_tier: "auto" }))).status).toBe(200);
    expect(s.fake.tokenizer.decode(s.fake.requests[0]!.promptTokenIds, { skipSpecialTokens: false })).toContain("[mint]");
    expect(s.fake.requests[0]!.sampling.cacheSalt).toBe("tenant-1");
  });

  test("Anthropic container: refused when set, passes when null", async () => {
    const s = testServer();
    const refused = await s.call("POST", "/v1/messages", ask({ container: "container_1" }));
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as Json).error.message).toContain("container");
    expect((await s.call("POST", "/v1/messages", ask({ container: null }))).status).toBe(200);
  });

  test("Ollama _debug_render_only true: a 400 that says fennec has no render-only mode", async () => {
    const s = testServer();
    const res = await s.call("POST", "/api/generate", { model: "fake-model", prompt: "hi", stream: false, _debug_render_only: true });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error).toContain("_debug_render_only");
  });
});
