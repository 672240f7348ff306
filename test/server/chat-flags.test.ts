/** vLLM's chat flags on fennec's command line: parsed, checked at start-up with vLLM's messages. */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readChatFlags } from "../../src/commands/chat-flags.ts";
import { chatTemplateFlags } from "../../src/command-line/chat-template-flags.ts";
import { commandHelp } from "../../src/command-line/help.ts";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { REASONING_PARSER_NAMES } from "../../src/server/openai/reasoning-parsers/registry.ts";
import { TOOL_PARSER_NAMES } from "../../src/server/openai/tool-parsers/registry.ts";

function flags(...argv: string[]) {
  const parsed = parseCommandArgs("serve", argv);
  if (!parsed.ok) throw new Error(parsed.error);
  return readChatFlags(chatTemplateFlags(parsed.value));
}

describe("chat flags", () => {
  test("defaults: the model's template, auto content format, no parsers", () => {
    expect(flags()).toEqual({
      chatTemplate: null, contentFormat: "auto", defaultTemplateKwargs: {}, trustRequestChatTemplate: false, responseRole: "assistant",
      enableAutoToolChoice: false, toolCallParser: null, reasoningParser: null, excludeToolsWhenToolChoiceNone: false,
    });
  });

  test("every flag read", () => {
    const dir = mkdtempSync(join(tmpdir(), "fennec-chat-"));
    const file = join(dir, "t.jinja");
    writeFileSync(file, "{% for m in messages %}{{ m.content }}{% endfor %}");
    const f = flags("--chat-template", file, "--chat-template-content-format", "openai", "--default-chat-template-kwargs", '{"enable_thinking": false}',
      "--trust-request-chat-template", "--response-role", "model", "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
      "--exclude-tools-when-tool-choice-none");
    expect(f).toEqual({
      chatTemplate: "{% for m in messages %}{{ m.content }}{% endfor %}", contentFormat: "openai", defaultTemplateKwargs: { enable_thinking: false },
      trustRequestChatTemplate: true, responseRole: "model", enableAutoToolChoice: true, toolCallParser: "hermes", reasoningParser: "qwen3",
      excludeToolsWhenToolChoiceNone: true,
    });
    expect(flags("--chat-template", "{{ messages[0].content }}").chatTemplate).toBe("{{ messages[0].content }}");
  });

  test("vLLM's start-up errors", () => {
    expect(() => flags("--enable-auto-tool-choice")).toThrow("Error: --enable-auto-tool-choice requires --tool-call-parser");
    expect(() => flags("--tool-call-parser", "nope")).toThrow("invalid tool call parser: nope");
    expect(() => flags("--reasoning-parser", "nope")).toThrow("invalid reasoning parser: nope");
    expect(() => flags("--chat-template", "/no/such/template.jinja")).toThrow("The supplied chat template string (/no/such/template.jinja) appears path-like, but doesn't exist!");
    expect(() => flags("--chat-template", "{% for %}")).toThrow("--chat-template: the template does not compile");
    expect(() => flags("--default-chat-template-kwargs", "[1]")).toThrow("--default-chat-template-kwargs must be a JSON object");
    expect(() => flags("--default-chat-template-kwargs", "{")).toThrow("--default-chat-template-kwargs must be a JSON object");
    const bad = parseCommandArgs("serve", ["--chat-template-content-format", "xml"]);
    expect(bad.ok).toBe(false);
  });

  test("--help names every parser", () => {
    const help = commandHelp("serve");
    for (const name of [...TOOL_PARSER_NAMES, ...REASONING_PARSER_NAMES]) expect(help).toContain(name);
    expect(commandHelp("run-batch")).toContain("--tool-call-parser");
  });
});
