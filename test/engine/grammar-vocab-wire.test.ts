/**
 * The grammar vocabulary's packed form (engine/protocol.ts): what crosses to the engine Worker as one string and its
 * ends comes back token for token after a structured clone (the Worker's postMessage), empty texts, multi-unit
 * characters and the real stories260K vocabulary included; and the clone of the packed form is cheaper than the array's.
 */
import { describe, expect, test } from "bun:test";
import { packGrammarVocab, unpackGrammarVocab } from "../../src/engine/protocol.ts";
import { openDefaultModel } from "../../src/gguf/default-model.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";

describe("packed grammar vocabulary", () => {
  test("round trip through a structured clone: every token, in order, with its kind and prefix flag", () => {
    const vocab = { encodedVocab: ["", "a", "", "Ġthe", "▁x", "<|special_5|>", "😀", "\u0000", "é", ""], vocabType: "byte_level" as const, prependSpace: true };
    const back = unpackGrammarVocab(structuredClone(packGrammarVocab(vocab)));
    expect(back).toEqual(vocab);
  });

  test("the default model's vocabulary comes back equal", () => {
    const vocab = createTokenizer(openDefaultModel()).grammarVocabulary!();
    const packed = packGrammarVocab(vocab);
    expect(packed.ends.length).toBe(vocab.encodedVocab.length);
    expect(unpackGrammarVocab(structuredClone(packed))).toEqual(vocab);
  });

  test("a large vocabulary clones faster packed than as an array of strings", () => {
    const vocab = { encodedVocab: Array.from({ length: 150_000 }, (_, i) => `Ġtok${i.toString(36)}`), vocabType: "byte_level" as const, prependSpace: false };
    const packed = packGrammarVocab(vocab);
    const time = (f: () => void) => { let best = Infinity; for (let r = 0; r < 3; r++) { const t = performance.now(); f(); best = Math.min(best, performance.now() - t); } return best; };
    const asArray = time(() => structuredClone(vocab));
    const asPacked = time(() => structuredClone(packed));
    expect(asPacked).toBeLessThan(asArray);
  });
});
