/**
 * The main thread's grammar checker thread (grammar-checker.ts drives it): builds a request's grammar with xgrammar,
 * without a tokenizer, to tell a bad schema / regex / grammar from a good one before any engine work. xgrammar aborts
 * inside WASM on bad input and cannot be trusted afterwards, so the checker replaces this thread after every failure.
 */
import * as xg from "@mlc-ai/web-xgrammar";
import { buildGrammar, cleanXGrammarError, GRAMMAR_ERROR_PREFIX, type GrammarSpec } from "./grammar-spec.ts";
import { errorMessage } from "../util/error-message.ts";

declare const self: Worker;

export interface CheckRequest {
  readonly id: number;
  readonly spec: GrammarSpec;
}

export interface CheckResponse {
  readonly id: number;
  /** null = the grammar is good; else vLLM's one-line failure text */
  readonly error: string | null;
}

// xgrammar binds console.error when it instantiates its WASM (its first call): keep what it prints for the message
let printed = "";
console.error = (...args: unknown[]): void => { printed += args.map(String).join(" ") + "\n"; };

self.onmessage = async (event: MessageEvent<CheckRequest>) => {
  const { id, spec } = event.data;
  printed = "";
  let error: string | null = null;
  try {
    (await buildGrammar(xg, spec)).dispose();
  } catch (e) {
    error = GRAMMAR_ERROR_PREFIX[spec.kind] + (cleanXGrammarError(printed) || errorMessage(e));
  }
  self.postMessage({ id, error } satisfies CheckResponse);
};
