/**
 * `<think>...</think>` parsers: `deepseek_r1` (vLLM's deepseek_r1_reasoning_parser.py) and `qwen3`
 * (qwen3_reasoning_parser.py). A leading `<think>` is dropped (templates that open the block in the prompt leave only
 * `</think>` to the model); text up to `</think>` is reasoning, the rest content.
 *   deepseek_r1: no `</think>` means the answer was cut while thinking: all reasoning.
 *   qwen3: the same, unless thinking was turned off (enable_thinking: false), then all content; and `<tool_call>`
 *   followed by `<function` also ends the reasoning (Qwen3.5 calls tools from inside the think block).
 */
import { partialTagLength } from "../tool-parsers/tool-parser.ts";
import type { ReasoningContext, ReasoningParser } from "./reasoning-parser.ts";

const START = "<think>";
const END = "</think>";
const TOOL_CALL = "<tool_call>";
const FUNCTION_OPEN = /^<function[\s=]/;

interface Flavour {
  readonly name: string;
  /** thinking off (by the request) makes an unclosed block content */
  readonly honoursThinkingOff: boolean;
  readonly toolCallEndsReasoning: boolean;
}

/** The text after the first `<think>` (vLLM partitions on it), or the text itself. */
function afterStart(text: string): string {
  const at = text.indexOf(START);
  return at < 0 ? text : text.slice(at + START.length);
}

function makeParser(flavour: Flavour): ReasoningParser {
  const thinkingOff = (context: ReasoningContext) => flavour.honoursThinkingOff && !context.thinkingEnabled;

  /** Where reasoning ends and content starts in `t` (after <think>), or null if not (yet) known; "hold" = wait. */
  function boundary(t: string, final: boolean): { reasoningEnd: number; contentStart: number } | "hold" | null {
    const end = t.indexOf(END);
    if (end >= 0) return { reasoningEnd: end, contentStart: end + END.length };
    if (flavour.toolCallEndsReasoning) {
      const call = t.indexOf(TOOL_CALL);
      if (call >= 0) {
        const after = t.slice(call + TOOL_CALL.length).trimStart();
        if (FUNCTION_OPEN.test(after)) return { reasoningEnd: call, contentStart: call };
        if (!final && "<function".startsWith(after.slice(0, 9))) return "hold";
      }
    }
    return null;
  }

  return {
    name: flavour.name,
    endToken: END,
    startToken: START,
    thinkingKwarg: flavour.honoursThinkingOff ? { name: "enable_thinking", default: true } : null,
    extract(text, context) {
      const t = afterStart(text);
      const b = boundary(t, true);
      if (b !== null && b !== "hold") {
        const content = t.slice(b.contentStart);
        const reasoning = t.slice(0, b.reasoningEnd);
        // vLLM keeps an empty reasoning before </think> as "", and drops it before an implicit <tool_call> end
        const implicit = b.reasoningEnd === b.contentStart;
        return { reasoning: implicit && reasoning === "" ? null : reasoning, content: content === "" ? null : content };
      }
      if (thinkingOff(context)) return { reasoning: null, content: t };
      return { reasoning: t, content: null };
    },
    split(text, final, context) {
      if (!final && text.indexOf(START) < 0 && text.length > 0 && START.startsWith(text)) return { reasoning: "", content: "" };
      const t = afterStart(text);
      if (thinkingOff(context) && t.indexOf(END) < 0) {
        return { reasoning: "", content: final ? t : t.slice(0, t.length - partialTagLength(t, END)) };
      }
      const b = boundary(t, final);
      if (b === "hold") return { reasoning: t.slice(0, t.indexOf(TOOL_CALL)), content: "" };
      if (b !== null) return { reasoning: t.slice(0, b.reasoningEnd), content: t.slice(b.contentStart) };
      if (final) return { reasoning: t, content: "" };
      const hold = Math.max(partialTagLength(t, END), flavour.toolCallEndsReasoning ? partialTagLength(t, TOOL_CALL) : 0);
      return { reasoning: t.slice(0, t.length - hold), content: "" };
    },
    promptEndsReasoning(prompt) {
      // the generation prompt ends with a closed block: `<think>\n\n</think>\n\n`
      return /<\/think>\s*$/.test(prompt);
    },
  };
}

export const deepseekR1ReasoningParser = makeParser({ name: "deepseek_r1", honoursThinkingOff: false, toolCallEndsReasoning: false });
export const qwen3ReasoningParser = makeParser({ name: "qwen3", honoursThinkingOff: true, toolCallEndsReasoning: true });
