/**
 * run-batch answers chat lines as `serve` does (vLLM's run-batch takes the same frontend flags): the chat template
 * flags, tool calling and the reasoning parser, on the embedded stories260K model (real engine).
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { runBatch } from "../../src/commands/run-batch.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-run-batch-chat-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TOOLS = [{ type: "function", function: { name: "pick", parameters: { type: "object", properties: { color: { type: "string", enum: ["red", "blue"] } }, required: ["color"], additionalProperties: false } } }];
const TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if tools %}tools: {{ tools | length }}\n{% endif %}{% if add_generation_prompt %}assistant:{% endif %}";

test("chat lines get the template, the tool-call and the reasoning parsers", async () => {
  const input = join(dir, "in.jsonl");
  const output = join(dir, "out.jsonl");
  const line = (custom_id: string, body: Record<string, unknown>) => JSON.stringify({ custom_id, method: "POST", url: "/v1/chat/completions", body: { max_tokens: 8, temperature: 0, ...body } });
  writeFileSync(input, [
    line("plain", { messages: [{ role: "user", content: "Lily" }] }),
    line("tools", { messages: [{ role: "user", content: "Lily" }], tools: TOOLS }),
    line("bad", { messages: [{ role: "user", content: "Lily" }], tools: [] }),
  ].join("\n") + "\n");
  const parsed = parseCommandArgs("run-batch", ["-i", input, "-o", output, "--threads", "1", "--chat-template", TEMPLATE,
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "deepseek_r1"]);
  if (!parsed.ok) throw new Error(parsed.error);
  await runBatch(parsed.value, { stdout: () => {} });
  const lines = readFileSync(output, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l));
  const [plain, tools, bad] = lines;
  // deepseek_r1: no </think> in the story, so the whole answer is reasoning and content is null
  const message = plain.response.body.choices[0].message;
  expect(typeof message.reasoning).toBe("string");
  expect(message.reasoning.length).toBeGreaterThan(0);
  expect(message.content).toBeNull();
  expect(tools.response.status_code).toBe(200);
  // the tools reached the template: its prompt is longer by the "tools: 1" line
  expect(tools.response.body.usage.prompt_tokens).toBeGreaterThan(plain.response.body.usage.prompt_tokens);
  expect(bad.response.status_code).toBe(400);
  expect(JSON.stringify(bad)).toContain("`tools` must not be an empty array");
}, 60_000);
