/**
 * `openai_gptoss` (gpt-oss, the Harmony format): the answer is a run of messages
 *   <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...<|return|>
 * (the template's generation prompt already wrote `<|start|>assistant`). The analysis channel is the reasoning, the
 * final channel the content (vLLM's gptoss_reasoning_parser.py reads the same channels through openai_harmony on
 * token ids; here on the text, which is why the markers are kept in it: keepSpecialTokens). A commentary message or one
 * addressed to a tool (`to=functions.x`) stays in the content whole, markers and all, for the `openai` tool parser.
 * Text outside any recognised message stays content, so nothing is lost.
 */
import { partialTagLength } from "../tool-parsers/tool-parser.ts";
import type { ReasoningParser } from "./reasoning-parser.ts";

const START = "<|start|>";
const CHANNEL = "<|channel|>";
const MESSAGE = "<|message|>";
const ENDS = ["<|end|>", "<|return|>", "<|call|>"];
const MARKERS = [START, CHANNEL, MESSAGE, ...ENDS];

interface Split { reasoning: string; content: string }

/** Longest suffix of text that may be the start of any marker (held back while streaming). */
function partialMarker(text: string): number {
  return Math.max(...MARKERS.map((m) => partialTagLength(text, m)));
}

function parseHarmony(text: string, final: boolean): Split | null {
  const out: Split = { reasoning: "", content: "" };
  let at = 0;
  while (at < text.length) {
    if (text.startsWith(START, at)) { at += START.length; continue; }
    const header = text.indexOf(MESSAGE, at);
    if (header < 0) {
      // a header still being written (e.g. "assistant<|channel|>fin"): wait; at the end it is not Harmony
      return final ? null : out;
    }
    const channel = /<\|channel\|>(\w+)/.exec(text.slice(at, header))?.[1];
    if (channel === undefined) return null;
    const bodyStart = header + MESSAGE.length;
    let bodyEnd = -1;
    let endLength = 0;
    for (const end of ENDS) {
      const i = text.indexOf(end, bodyStart);
      if (i >= 0 && (bodyEnd < 0 || i < bodyEnd)) { bodyEnd = i; endLength = end.length; }
    }
    const open = bodyEnd < 0;
    let body = open ? text.slice(bodyStart) : text.slice(bodyStart, bodyEnd);
    if (open && !final) body = body.slice(0, body.length - partialMarker(body));
    const addressed = text.slice(at, header).includes("to=");
    if (addressed || channel === "commentary") {
      // a message to a tool (or a commentary preamble) goes to the content whole, header and markers, where the
      // openai tool parser reads it (<|start|> marks where its header begins)
      const head = text.slice(at, header);
      out.content += `${START}${head.startsWith("assistant") ? "" : "assistant"}${head}${MESSAGE}${body}${open ? "" : text.slice(bodyEnd, bodyEnd + endLength)}`;
    } else if (channel === "analysis") out.reasoning += body;
    else if (channel === "final") out.content += body;
    else return null;
    if (open) break;
    at = bodyEnd + endLength;
  }
  return out;
}

export const gptOssReasoningParser: ReasoningParser = {
  name: "openai_gptoss",
  thinkingKwarg: null,
  keepSpecialTokens: true,
  extract(text) {
    const split = parseHarmony(text, true);
    if (split === null) return { reasoning: null, content: text };
    return { reasoning: split.reasoning === "" ? null : split.reasoning, content: split.content === "" ? null : split.content };
  },
  split(text, final) {
    const split = parseHarmony(text, final);
    return split ?? { reasoning: "", content: text };
  },
  promptEndsReasoning: () => false,
  // the reasoning ends at a multi-token channel switch (<|channel|>final), not one token: a grammar still holds from the first token here and the output is all content
  endToken: null,
};
