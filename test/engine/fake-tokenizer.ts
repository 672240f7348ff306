/** A tiny tokenizer for engine tests: token id t is the letter "a" + t % 26 (id 2 is EOS and renders as nothing). */
import type { IncrementalDetokenizer, Tokenizer } from "../../src/tokenizer/tokenizer.ts";

export const FAKE_EOS = 2;

export function fakeText(ids: readonly number[]): string {
  return ids.filter((t) => t !== FAKE_EOS).map((t) => String.fromCharCode(97 + (t % 26))).join("");
}

export function createFakeTokenizer(): Tokenizer {
  return {
    vocabSize: 97, bosId: 1, eosId: FAKE_EOS, stopIds: [FAKE_EOS],
    encode: (text) => [...text].map((c) => c.charCodeAt(0) - 97 + 26),
    decode: (ids) => fakeText(ids),
    tokenText: (id) => fakeText([id]),
    isSpecial: (id) => id === FAKE_EOS,
    createDetokenizer: (): IncrementalDetokenizer => ({ push: (ids) => fakeText(ids), flush: () => "" }),
    applyChatTemplate: (messages) => messages.map((m) => m.content).join("\n"),
  };
}
