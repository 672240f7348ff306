/**
 * `granite` (Granite 3.2+ with `thinking: true`): "Here is my thought process:" ... "Here is my response:" ...
 * ("Here's" too). Non-streaming: both markers or it is all content (vLLM's granite_reasoning_parser.py); streaming:
 * reasoning once the first marker is complete, content after the second; text that cannot become the first
 * marker is content.
 */
import type { ReasoningParser } from "./reasoning-parser.ts";

const THINK_STARTS = ["Here's my thought process:", "Here is my thought process:"];
const RESPONSE_STARTS = ["Here's my response:", "Here is my response:"];
const FULL = /(?:Here's|Here is) my thought process:([^]*?)(?:Here's|Here is) my response:([^]*)/;

/** Length of the longest suffix of text that is a proper prefix of one of the markers. */
function partialMarker(text: string, markers: readonly string[]): number {
  let best = 0;
  for (const m of markers) for (let n = Math.min(m.length - 1, text.length); n > best; n--) if (text.endsWith(m.slice(0, n))) { best = n; break; }
  return best;
}

export const graniteReasoningParser: ReasoningParser = {
  name: "granite",
  thinkingKwarg: { name: "thinking", default: false },
  extract(text) {
    const m = FULL.exec(text);
    if (m === null) return { reasoning: null, content: text };
    return { reasoning: m[1]!, content: m[2] === "" ? null : m[2]! };
  },
  split(text, final) {
    const start = THINK_STARTS.find((s) => text.startsWith(s));
    if (start === undefined) {
      if (!final && THINK_STARTS.some((s) => s.startsWith(text))) return { reasoning: "", content: "" };
      return { reasoning: "", content: text };
    }
    const body = text.slice(start.length);
    let at = -1;
    let marker = "";
    for (const r of RESPONSE_STARTS) {
      const i = body.indexOf(r);
      if (i >= 0 && (at < 0 || i < at)) { at = i; marker = r; }
    }
    if (at >= 0) return { reasoning: body.slice(0, at), content: body.slice(at + marker.length) };
    return { reasoning: final ? body : body.slice(0, body.length - partialMarker(body, RESPONSE_STARTS)), content: "" };
  },
  promptEndsReasoning: () => false,
  // the reasoning ends at plain text ("Here is my response:"), not one token: a grammar still holds from the first token here and the output is all content
  endToken: null,
};
