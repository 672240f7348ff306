/**
 * Structured outputs in the compiled binary, copied alone into an empty folder (xgrammar's WASM and both grammar
 * threads must be inside it): the official openai client's chat.completions.parse with a zod schema, streaming,
 * n > 1, stop strings, logprobs, max_tokens -> finish_reason length, a bad grammar's 400, and run-batch.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { freePort } from "./server-process.ts";

setDefaultTimeout(120_000);

const BINARY = join(import.meta.dir, "..", "..", "dist", "fennec");
const dir = mkdtempSync(join(tmpdir(), "fennec-so-bin-"));
const binary = join(dir, "fennec");
let server: ReturnType<typeof Bun.spawn> | null = null;
let client: OpenAI;
let baseURL = "";

beforeAll(async () => {
  if (!existsSync(BINARY)) throw new Error(`${BINARY} is missing: run npx bun run build.ts first`);
  copyFileSync(BINARY, binary);
  const port = freePort();
  server = Bun.spawn([binary, "serve", "--port", String(port), "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'], { cwd: dir, stdout: "ignore", stderr: "pipe" });
  baseURL = `http://127.0.0.1:${port}/v1`;
  for (let i = 0; i < 600; i++) {
    if (await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false)) break;
    await Bun.sleep(100);
  }
  client = new OpenAI({ baseURL, apiKey: "none" });
});
afterAll(async () => {
  server?.kill();
  await server?.exited;
  rmSync(dir, { recursive: true, force: true });
});

const Story = z.object({ hero: z.enum(["Lily", "Tom", "Max"]), age: z.number().int().min(1).max(9), happy: z.boolean(), pets: z.array(z.enum(["cat", "dog"])).max(2) });

describe("the compiled binary, alone in a folder", () => {
  test("openai chat.completions.parse with a zod response format", async () => {
    const completion = await client.chat.completions.parse({
      model: "", messages: [{ role: "user", content: "Tell me about the hero." }], max_tokens: 120, temperature: 0,
      response_format: zodResponseFormat(Story, "story"),
    });
    const parsed = completion.choices[0]!.message.parsed;
    expect(completion.choices[0]!.finish_reason).toBe("stop");
    expect(Story.parse(parsed)).toEqual(parsed!);
  });

  test("streaming, n > 1, stop strings and logprobs under a grammar", async () => {
    // structured_outputs: vLLM's extra field, passed through by the client
    const params: OpenAI.ChatCompletionCreateParamsStreaming & { structured_outputs: unknown } = {
      model: "", messages: [{ role: "user", content: "pick" }], max_tokens: 40, temperature: 1, seed: 7, n: 2, stream: true,
      logprobs: true, top_logprobs: 2, structured_outputs: { choice: ["once upon a time", "the end"] },
    };
    const stream = await client.chat.completions.create(params);
    const texts = ["", ""];
    const finishes: (string | null)[] = [null, null];
    let numLogprobs = 0;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        texts[c.index] += c.delta.content ?? "";
        if (c.finish_reason) finishes[c.index] = c.finish_reason;
        numLogprobs += c.logprobs?.content?.length ?? 0;
      }
    }
    for (const t of texts) expect(["once upon a time", "the end"]).toContain(t);
    expect(finishes).toEqual(["stop", "stop"]);
    expect(numLogprobs).toBeGreaterThan(0);
    // a stop string inside the grammar's answer ends it early, as without a grammar
    const stopParams: OpenAI.CompletionCreateParamsNonStreaming & { structured_outputs: unknown } = {
      model: "", prompt: "x", max_tokens: 40, temperature: 0, stop: [" upon"], structured_outputs: { choice: ["once upon a time"] },
    };
    const stopped = await client.completions.create(stopParams);
    expect(stopped.choices[0]!.text).toBe("once");
    expect(stopped.choices[0]!.finish_reason).toBe("stop");
  });

  test("a truncated JSON answer ends with finish_reason length; a bad regex is a 400", async () => {
    const cut = await client.chat.completions.create({ model: "", messages: [{ role: "user", content: "json" }], max_tokens: 3, response_format: { type: "json_object" } });
    expect(cut.choices[0]!.finish_reason).toBe("length");
    expect(cut.choices[0]!.message.content!.startsWith("{")).toBe(true);
    const bad = await fetch(`${baseURL}/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "x", structured_outputs: { regex: "(" } }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe("structured_outputs.regex");
  });

  test("run-batch honours response_format", async () => {
    const input = join(dir, "in.jsonl");
    const output = join(dir, "out.jsonl");
    const schema = { type: "object", properties: { n: { type: "integer", minimum: 1, maximum: 5 } }, required: ["n"] };
    writeFileSync(input, [1, 2].map((i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/chat/completions", body: { messages: [{ role: "user", content: "n?" }], max_tokens: 60, seed: i, response_format: { type: "json_schema", json_schema: { name: "n", schema } } } })).join("\n"));
    const proc = Bun.spawn([binary, "run-batch", "-i", input, "-o", output, "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'], { cwd: dir, stdout: "ignore", stderr: "pipe" });
    expect(await proc.exited).toBe(0);
    const lines = readFileSync(output, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      const n = JSON.parse(line.response.body.choices[0].message.content).n;
      expect(Number.isInteger(n) && n >= 1 && n <= 5).toBe(true);
    }
  });
});
