/**
 * Tokenizer behaviour beyond the llama.cpp vectors: special tokens, add_bos/add_eos, the incremental detokenizer
 * (never half a UTF-8 character), tokenText, chat templates (real templates from the vocab GGUFs and llama.cpp's
 * models/templates), the plain fallback, bad metadata, and speed on a 150k vocabulary.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { llamaTemplatePath, llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { GgufValueType, type GgufFile, type GgufMetadataEntry } from "../../src/gguf/gguf-file.ts";
import { KEY } from "../../src/gguf/names.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import { TokenizerError, type Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { rng } from "../helpers/prng.ts";
import { loadVocabTokenizer, readGgufOrThrow, stories260kGguf } from "./helpers.ts";

const NO_SPECIAL = { addSpecial: false, parseSpecial: false } as const;
/** tests that build a fresh 150k-vocab tokenizer (~0.2 s idle, seconds on a busy shared CI box) */
const LOAD_TIMEOUT_MS = 30_000;

function withMetadata(gguf: GgufFile, changes: Record<string, GgufMetadataEntry | null>): GgufFile {
  const metadata = new Map(gguf.metadata);
  for (const [key, entry] of Object.entries(changes)) {
    if (entry === null) metadata.delete(key);
    else metadata.set(key, entry);
  }
  return { ...gguf, metadata };
}
const str = (value: string): GgufMetadataEntry => ({ type: GgufValueType.STRING, value });

const qwen2Gguf = readGgufOrThrow(llamaVocabPath("qwen2"));
const qwen2 = createTokenizer(qwen2Gguf);
const llamaSpm = loadVocabTokenizer("llama-spm");
const llamaBpe = loadVocabTokenizer("llama-bpe");
const gpt2 = loadVocabTokenizer("gpt-2");
const stories = createTokenizer(stories260kGguf());

/** a token's id straight from the GGUF token list (independent of the tokenizer under test) */
function idOfText(gguf: GgufFile, text: string): number {
  const entry = gguf.metadata.get(KEY.tokens)!.value;
  const id = typeof entry === "object" ? entry.values.indexOf(text) : -1;
  if (id < 0) throw new Error(`no token ${text}`);
  return id;
}

describe("special tokens", () => {
  const imStart = idOfText(qwen2Gguf, "<|im_start|>");
  const imEnd = idOfText(qwen2Gguf, "<|im_end|>");
  const chat = "<|im_start|>user\nHi<|im_end|>";

  test("parseSpecial turns special texts into their ids", () => {
    const ids = qwen2.encode(chat, { addSpecial: false, parseSpecial: true });
    expect(ids[0]).toBe(imStart);
    expect(ids.at(-1)).toBe(imEnd);
    expect(qwen2.isSpecial(imStart)).toBe(true);
  });

  test("without parseSpecial they are plain text", () => {
    const ids = qwen2.encode(chat, NO_SPECIAL);
    expect(ids).not.toContain(imStart);
    expect(ids).not.toContain(imEnd);
    expect(qwen2.decode(ids)).toBe(chat);
  });

  test("decode hides special tokens unless asked", () => {
    const ids = qwen2.encode(chat, { addSpecial: false, parseSpecial: true });
    expect(qwen2.decode(ids, { skipSpecialTokens: false })).toBe(chat);
    expect(qwen2.decode(ids, { skipSpecialTokens: true })).toBe("user\nHi");
  });

  test("end-of-turn texts are stop ids", () => {
    expect(qwen2.stopIds).toContain(imEnd);
    expect(qwen2.stopIds).toContain(qwen2.eosId!);
  });

  test("SPM: text after a special token gets the prefix space again", () => {
    const ids = llamaSpm.encode("Hello</s>Hello", { addSpecial: false, parseSpecial: true });
    const hello = llamaSpm.encode("Hello", NO_SPECIAL);
    expect(ids).toEqual([...hello, 2, ...hello]);
  });
});

describe("add_bos / add_eos from metadata", () => {
  test("llama-spm adds BOS 1, llama-bpe adds BOS 128000, qwen2 and gpt-2 add nothing", () => {
    expect(llamaSpm.encode("Hi", { addSpecial: true, parseSpecial: false })[0]).toBe(1);
    expect(llamaBpe.encode("Hi", { addSpecial: true, parseSpecial: false })[0]).toBe(128000);
    expect(qwen2.encode("Hi", { addSpecial: true, parseSpecial: false })).toEqual(qwen2.encode("Hi", NO_SPECIAL));
    expect(gpt2.encode("Hi", { addSpecial: true, parseSpecial: false })).toEqual(gpt2.encode("Hi", NO_SPECIAL));
  });

  test("add_eos_token=true appends EOS; add_bos_token=false drops BOS", () => {
    const gguf = withMetadata(stories260kGguf(), {
      [KEY.addEos]: { type: GgufValueType.BOOL, value: true },
      [KEY.addBos]: { type: GgufValueType.BOOL, value: false },
    });
    expect(createTokenizer(gguf).encode("Once upon a time", { addSpecial: true, parseSpecial: false })).toEqual([403, 407, 261, 378, 2]);
  });
});

describe("incremental detokenizer", () => {
  const texts = ["émoji 🦙 and 中文", "🚀 (normal) 😶‍🌫️ ✅", "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "нещо на Български"];
  const tokenizers: [string, Tokenizer][] = [["llama-spm", llamaSpm], ["gpt-2", gpt2], ["qwen2", qwen2], ["stories260K", stories]];

  test.each(tokenizers)("%s: one id at a time never emits half a character", (_name, tok) => {
    for (const text of texts) {
      const ids = tok.encode(text, NO_SPECIAL);
      const detok = tok.createDetokenizer({ skipSpecialTokens: true, stripLeadingSpace: true });
      let out = "";
      for (const id of ids) {
        const chunk = detok.push([id]);
        expect(chunk).not.toContain("\uFFFD");
        out += chunk;
      }
      out += detok.flush();
      expect(out).toBe(text); // streaming does no GPT-2 space clean-up, so every vocab round-trips here

    }
  });

  test("byte tokens of one emoji come out only when the last byte arrives; flush gives U+FFFD for a cut-off one", () => {
    const ids = stories.encode("🦙", NO_SPECIAL); // "▁" then four <0xXX> byte tokens
    expect(ids.length).toBe(5);
    const detok = stories.createDetokenizer({ skipSpecialTokens: true });
    expect(detok.push(ids.slice(0, 4))).toBe(" ");
    expect(detok.push(ids.slice(4))).toBe("🦙");
    const cut = stories.createDetokenizer();
    expect(cut.push(ids.slice(1, 3))).toBe("");
    expect(cut.flush()).toBe("\uFFFD");
  });

  test("SPM leading space: kept for a continuation, dropped when asked (text starts here) and by decode", () => {
    const ids = stories.encode("Once upon a time", NO_SPECIAL);
    expect(stories.createDetokenizer().push(ids)).toBe(" Once upon a time");
    expect(stories.createDetokenizer({ skipSpecialTokens: true, stripLeadingSpace: true }).push(ids)).toBe("Once upon a time");
    expect(stories.decode(ids)).toBe("Once upon a time");
  });
});

describe("tokenText", () => {
  test("normal, byte and special tokens", () => {
    expect(stories.tokenText(1)).toBe("<s>");
    expect(stories.tokenText(3 + 0x41)).toBe("A"); // <0x41>
    expect(stories.tokenText(3 + 0xe4)).toBe("\u00e4"); // lone byte 0xE4: latin1
    expect(gpt2.tokenText(gpt2.encode(" world", NO_SPECIAL)[0]!)).toBe(" world");
  });
});

describe("chat templates", () => {
  const messages = [{ role: "user", content: "Hi" }];

  test("qwen2 vocab's own template (ChatML with a default system prompt)", () => {
    expect(qwen2.applyChatTemplate(messages, { addGenerationPrompt: true })).toBe(
      "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
    expect(qwen2.applyChatTemplate(messages, { addGenerationPrompt: false })).toBe(
      "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    );
  });

  test("phi-3 vocab's template uses bos_token", () => {
    const phi3 = loadVocabTokenizer("phi-3");
    expect(phi3.applyChatTemplate(messages, { addGenerationPrompt: true })).toBe("<s><|user|>\nHi<|end|>\n<|assistant|>\n");
  });

  test("Qwen2.5-Instruct template from llama.cpp's models/templates, then tokenized with parseSpecial", () => {
    const template = readFileSync(llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"), "utf8");
    const tok = createTokenizer(withMetadata(qwen2Gguf, { [KEY.chatTemplate]: str(template) }));
    const prompt = tok.applyChatTemplate(
      [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }, { role: "assistant", content: "Hello!" }, { role: "user", content: "Bye" }],
      { addGenerationPrompt: true },
    );
    expect(prompt).toBe(
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n" +
        "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n",
    );
    const ids = tok.encode(prompt, { addSpecial: true, parseSpecial: true });
    const imStart = idOfText(qwen2Gguf, "<|im_start|>");
    expect(ids.filter((id) => id === imStart).length).toBe(5);
  }, LOAD_TIMEOUT_MS);

  test("a model without a template gets the plain fallback, starting with BOS as text", () => {
    const turns = [{ role: "system", content: "Tell stories." }, { role: "user", content: "A cat" }];
    const prompt = stories.applyChatTemplate(turns, { addGenerationPrompt: true });
    expect(prompt).toBe("<s>system: Tell stories.\nuser: A cat\nassistant:");
    expect(stories.applyChatTemplate(turns, { addGenerationPrompt: false })).toBe("<s>system: Tell stories.\nuser: A cat\n");
    const ids = stories.encode(prompt, { addSpecial: false, parseSpecial: true });
    expect(ids[0]).toBe(1);
    expect(ids.filter((id) => id === 1).length).toBe(1);
  });

  test("a broken template is a one-line TokenizerError naming the file", () => {
    const tok = createTokenizer(withMetadata(qwen2Gguf, { [KEY.chatTemplate]: str("{% for m in messages %}") }));
    expect(() => tok.applyChatTemplate(messages, { addGenerationPrompt: true })).toThrow(TokenizerError);
    try {
      tok.applyChatTemplate(messages, { addGenerationPrompt: true });
    } catch (e) {
      expect((e as Error).message).toContain("ggml-vocab-qwen2.gguf: tokenizer.chat_template:");
      expect((e as Error).message).not.toContain("\n");
    }
  }, LOAD_TIMEOUT_MS);
});

describe("bad metadata gives one clear error", () => {
  const cases: [string, Record<string, GgufMetadataEntry | null>, string][] = [
    ["no tokenizer", { [KEY.tokenizerModel]: null }, "tokenizer.ggml.model: missing"],
    ["unknown model", { [KEY.tokenizerModel]: str("bert") }, 'unsupported tokenizer model "bert"'],
    ["unknown pre-tokenizer", { [KEY.tokenizerPre]: str("nonesuch") }, 'unsupported pre-tokenizer "nonesuch"'],
    ["no merges", { [KEY.merges]: null }, "tokenizer.ggml.merges: missing"],
    ["tokens not strings", { [KEY.tokens]: { type: GgufValueType.ARRAY, value: { elementType: GgufValueType.INT32, values: [1] } } }, "tokenizer.ggml.tokens: unexpected element type"],
  ];
  test.each(cases)("%s", (_name, changes, message) => {
    expect(() => createTokenizer(withMetadata(qwen2Gguf, changes))).toThrow(message);
  }, LOAD_TIMEOUT_MS);
});

describe("speed", () => {
  /** ~2,000+ tokens of seeded pseudo-random words (few repeats, so the word cache does not hide the merge work) */
  function randomText(numWords: number): string {
    const next = rng(12345);
    const letters = "abcdefghijklmnopqrstuvwxyzéü";
    const words: string[] = [];
    for (let i = 0; i < numWords; i++) {
      let w = "";
      const len = 2 + Math.floor(next() * 8);
      for (let j = 0; j < len; j++) w += letters[Math.floor(next() * letters.length)];
      words.push(next() < 0.1 ? `${w}, ${Math.floor(next() * 100000)}` : w);
    }
    return words.join(" ");
  }

  test("a ~2,000-token prompt on the 151,936-token qwen2 vocab takes milliseconds", () => {
    const text = randomText(700);
    // CPU time, not wall time: a busy shared CI box stretches wall time but not the work done
    let bestCpuMs = Infinity;
    let ids: number[] = [];
    for (let run = 0; run < 3; run++) {
      const fresh = createTokenizer(qwen2Gguf); // empty word cache
      const before = process.cpuUsage();
      ids = fresh.encode(text, NO_SPECIAL);
      const used = process.cpuUsage(before);
      bestCpuMs = Math.min(bestCpuMs, (used.user + used.system) / 1000);
    }
    expect(ids.length).toBeGreaterThan(1800);
    expect(ids.length).toBeLessThan(4000);
    expect(bestCpuMs).toBeLessThan(150); // measured 10-20 ms on a 2-core box; the bound leaves room for CI noise
    expect(qwen2.decode(ids)).toBe(text);
  }, LOAD_TIMEOUT_MS);
});
