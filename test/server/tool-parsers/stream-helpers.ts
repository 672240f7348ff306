/**
 * Runs a tool parser the two ways the server does: on the whole text (non-streaming) and as a stream of deltas from
 * arbitrary splits of the same text, checking the stream's shape on the way (name first, with index, id and type;
 * then argument fragments only).
 */
import { expect } from "bun:test";
import { ToolCallStreamer, type ToolParser } from "../../../src/server/openai/tool-parsers/tool-parser.ts";
import type { ToolDefinition } from "../../../src/server/openai/tool-parsers/tool-definition.ts";

export interface Collected {
  content: string;
  calls: { id: string; name: string; arguments: string }[];
}

export function streamed(parser: ToolParser, chunks: readonly string[], tools: readonly ToolDefinition[] = [], idPattern = /^chatcmpl-tool-[0-9a-f]{16}$/): Collected {
  const streamer = new ToolCallStreamer(parser, tools, false);
  const out: Collected = { content: "", calls: [] };
  let text = "";
  const take = (final: boolean) => {
    for (const delta of streamer.push(text, final)) {
      expect(delta.reasoning).toBeUndefined();
      if (delta.content !== undefined) {
        expect(delta.tool_calls).toBeUndefined();
        out.content += delta.content;
      }
      for (const call of delta.tool_calls ?? []) {
        if (call.id !== undefined) {
          // the first delta of a call: its index is the next one, with id, type and the whole name, no arguments
          expect(call.index).toBe(out.calls.length);
          expect(call.id).toMatch(idPattern);
          expect(call.type).toBe("function");
          expect(typeof call.function.name).toBe("string");
          expect(call.function.arguments).toBeUndefined();
          out.calls.push({ id: call.id, name: call.function.name!, arguments: "" });
        } else {
          expect(call.function.name).toBeUndefined();
          expect(out.calls[call.index]).toBeDefined();
          out.calls[call.index]!.arguments += call.function.arguments ?? "";
        }
      }
    }
  };
  for (const chunk of chunks) {
    text += chunk;
    take(false);
  }
  take(true);
  return out;
}

/** Every way to cut `text` in two, and one character at a time. */
export function splits(text: string): string[][] {
  const out: string[][] = [[...text]];
  for (let k = 0; k <= text.length; k++) out.push([text.slice(0, k), text.slice(k)]);
  return out;
}

export interface Golden {
  readonly text: string;
  readonly content: string;
  /** name and parsed arguments of each call */
  readonly calls: readonly { readonly name: string; readonly arguments: unknown }[];
}

/** Non-streaming parse and every split of the stream agree with the golden answer. */
export function checkGolden(parser: ToolParser, golden: Golden, tools: readonly ToolDefinition[] = [], idPattern?: RegExp): void {
  const whole = parser.parse(golden.text, true, tools);
  expect(whole.content).toBe(golden.content);
  expect(whole.calls.map((c) => ({ name: c.name, arguments: JSON.parse(c.arguments) as unknown }))).toEqual([...golden.calls]);
  for (const chunks of splits(golden.text)) {
    const s = streamed(parser, chunks, tools, idPattern);
    // a call's content is what precedes it; a text without a (valid) call is all content
    expect(s.content).toBe(golden.content);
    if (golden.calls.length === 0) {
      // malformed: the whole text still arrives as content, so nothing is lost; a call streamed before the text
      // went wrong cannot be taken back (vLLM's streams neither)
      continue;
    }
    expect(s.calls.map((c) => c.name)).toEqual(golden.calls.map((c) => c.name));
    // the fragments concatenate to valid JSON: the same arguments
    expect(s.calls.map((c) => JSON.parse(c.arguments) as unknown)).toEqual(golden.calls.map((c) => c.arguments));
  }
}
