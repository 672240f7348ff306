/**
 * Every real chat template in llama.cpp's models/templates/ (read at test time from the tree node-llama-cpp ships)
 * renders the conversation: a system prompt, two user turns, an assistant tool call and its tool result, with
 * one tool defined. Plus what vLLM passes besides the messages: continue_final_message (transformers' cut and errors),
 * chat_template_kwargs (Qwen3's enable_thinking), documents, the content format.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { ChatTemplate, detectContentFormat } from "../../src/tokenizer/chat-template.ts";
import type { ChatTemplateOptions } from "../../src/tokenizer/tokenizer.ts";
import { Template } from "@huggingface/jinja";
import { TOOL_CONVERSATION, WEATHER_TOOL, realTemplateNames } from "./real-templates.ts";

/** Templates that need something @huggingface/jinja 0.5.11 does not have (the error it gives names it). */
const NEEDS_MISSING_JINJA_FEATURE: Readonly<Record<string, string>> = {
  "Apriel-1.6-15b-Thinker-fixed": "the `string` filter on a mapping (Unknown ObjectValue filter: string)",
  "unsloth-Apriel-1.5": "the `string` filter on a mapping (Unknown ObjectValue filter: string)",
  "ByteDance-Seed-OSS": "integer keys in a dict literal (Object keys must be strings)",
  "Kimi-K2-Instruct": "Python list methods append()/pop() on a namespace list (not a function)",
  "Kimi-K2-Thinking": "Python list methods append()/pop() on a namespace list (not a function)",
  "meetkai-functionary-medium-v3.2": "unpacking a tuple in a for loop (Cannot unpack non-iterable type: TupleValue)",
  "openbmb-MiniCPM5-1B": "the `min` filter on a list (Unknown ArrayValue filter: min)",
  "tencent-Hy3": "Python's str.format() (not a function)",
};

/** Templates that refuse this conversation on purpose (raise_exception): the client gets the template's message. */
const REFUSES_BY_DESIGN: Readonly<Record<string, string>> = {
  "google-gemma-2-2b-it": "System role not supported",
};

/** Templates without tool support: they render, but the call or its result is not shown. */
const NO_TOOL_SUPPORT = new Set([
  "HuggingFaceTB-SmolLM3-3B", // drops assistant tool_calls (content only)
  "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", // shows tool outputs, not the calls
  "llama-cpp-rwkv-world", // user/assistant/system only
  "microsoft-Phi-3.5-mini-instruct", // no tools at all
  "LFM2-8B-A1B", // lists the tools, expects calls written into the assistant's content
  "LFM2.5-Instruct", // same
  "ibm-granite-granite-3.3-2B-Instruct", // shows the tool result, not the assistant's call
]);

/** Mistral Nemo writes the system prompt into the last user turn; here the conversation ends on a tool result. */
const DROPS_SYSTEM_PROMPT = new Set(["mistralai-Mistral-Nemo-Instruct-2407"]);

/** Options a template needs beyond the conversation. */
const EXTRA_OPTIONS: Readonly<Record<string, Partial<ChatTemplateOptions>>> = {
  // firefunction-v2 reads its own kwargs: the functions' JSON and the date
  "fireworks-ai-llama-3-firefunction-v2": { kwargs: { functions: JSON.stringify([WEATHER_TOOL.function]), datetime: "2026-12-01" } },
  // gemma-4 loops over content parts of user turns but trims the system content as a string
  "google-gemma-4-31B-it": { contentFormat: "string" },
  "google-gemma-4-31B-it-interleaved": { contentFormat: "string" },
};

const SPECIALS = { bosToken: "<s>", eosToken: "</s>" };
const load = (name: string) => new ChatTemplate(readFileSync(llamaTemplatePath(name), "utf8"), SPECIALS, name);

describe("every template in llama.cpp's models/templates renders the tool conversation", () => {
  const names = realTemplateNames();
  test("the tree holds the templates the issue names", () => {
    expect(names.length).toBeGreaterThanOrEqual(60);
    for (const n of ["Qwen-Qwen3-0.6B", "Qwen3-Coder", "meta-llama-Llama-3.1-8B-Instruct", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "openai-gpt-oss-120b"]) expect(names).toContain(n);
  });
  for (const name of names) {
    const missing = NEEDS_MISSING_JINJA_FEATURE[name];
    if (missing !== undefined) {
      test.skip(`${name} (needs ${missing})`, () => {});
      continue;
    }
    test(name, () => {
      const template = load(name);
      const options: ChatTemplateOptions = { addGenerationPrompt: true, tools: [WEATHER_TOOL], ...EXTRA_OPTIONS[name] };
      const refusal = REFUSES_BY_DESIGN[name];
      if (refusal !== undefined) {
        expect(() => template.apply(TOOL_CONVERSATION, options)).toThrow(refusal);
        return;
      }
      const text = template.apply(TOOL_CONVERSATION, options);
      if (!DROPS_SYSTEM_PROMPT.has(name)) expect(text).toContain("You are a helpful assistant.");
      expect(text).toContain("Hello!");
      expect(text).toContain("What is the weather in Paris?");
      if (!NO_TOOL_SUPPORT.has(name)) {
        expect(text).toContain("get_weather");
        expect(text).toContain("temperature_c");
        // the call's arguments reach the template as an object (vLLM parses the JSON string), rendered once, not re-quoted
        expect(text).not.toContain('\\"city\\"');
        expect(text).toMatch(/city[^]{0,40}Paris/);
        // the user's second turn comes before the tool result
        expect(text.indexOf("What is the weather in Paris?")).toBeLessThan(text.lastIndexOf("temperature_c"));
      }
    });
  }
});

describe("what vLLM passes to the template besides the messages", () => {
  const qwen25 = () => load("Qwen-Qwen2.5-7B-Instruct");
  const turns = [{ role: "user", content: "Tell me a story" }, { role: "assistant", content: "Once upon a time " }];

  test("continue_final_message cuts after the final message's content (no end-of-turn), keeping its trailing space", () => {
    const text = qwen25().apply(turns, { addGenerationPrompt: false, continueFinalMessage: true });
    expect(text.endsWith("<|im_start|>assistant\nOnce upon a time ")).toBe(true);
    const closed = qwen25().apply(turns, { addGenerationPrompt: false });
    expect(closed.endsWith("Once upon a time <|im_end|>\n")).toBe(true);
  });

  test("continue_final_message with add_generation_prompt is transformers' error", () => {
    expect(() => qwen25().apply(turns, { addGenerationPrompt: true, continueFinalMessage: true })).toThrow("continue_final_message and add_generation_prompt are not compatible");
  });

  test("continue_final_message when the template drops the final message's text is transformers' error", () => {
    const dropping = new ChatTemplate("{% for m in messages %}{{ m.role }}{% endfor %}", SPECIALS, "t");
    expect(() => dropping.apply(turns, { addGenerationPrompt: false, continueFinalMessage: true })).toThrow("the final message does not appear in the chat");
  });

  test("chat_template_kwargs enable_thinking=false: Qwen3's template closes the think block in the prompt", () => {
    const qwen3 = load("Qwen-Qwen3-0.6B");
    const user = [{ role: "user", content: "Hi" }];
    expect(qwen3.apply(user, { addGenerationPrompt: true }).endsWith("<|im_start|>assistant\n")).toBe(true);
    expect(qwen3.apply(user, { addGenerationPrompt: true, kwargs: { enable_thinking: false } }).endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
  });

  test("documents reach a RAG template (Granite 3.3)", () => {
    const granite = load("ibm-granite-granite-3.3-2B-Instruct");
    const text = granite.apply([{ role: "user", content: "Where is the fox?" }], { addGenerationPrompt: true, documents: [{ doc_id: 1, title: "Fox facts", text: "The fox lives in the forest." }] });
    expect(text).toContain("The fox lives in the forest.");
  });

  test("content format: detected from the template's loops, and text parts joined for string templates", () => {
    expect(detectContentFormat(new Template("{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}"))).toBe("openai");
    expect(detectContentFormat(new Template("{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}"))).toBe("openai");
    expect(detectContentFormat(new Template("{% for m in messages %}{{ m.content }}{% endfor %}"))).toBe("string");
    const parts = [{ role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] }];
    const show = new ChatTemplate("{% for m in messages %}{{ m.content | tojson }}{% endfor %}", SPECIALS, "t");
    expect(show.apply(parts, { addGenerationPrompt: false })).toBe('"a\\nb"');
    expect(show.apply(parts, { addGenerationPrompt: false, contentFormat: "openai" })).toBe('[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]');
    expect(show.apply([{ role: "user", content: "c" }], { addGenerationPrompt: false, contentFormat: "openai" })).toBe('[{"type": "text", "text": "c"}]');
  });

  test("a template given for the request replaces the model's", () => {
    const text = qwen25().apply([{ role: "user", content: "Hi" }], { addGenerationPrompt: true, template: "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}" });
    expect(text).toBe("<s>[user]Hi");
  });
});
