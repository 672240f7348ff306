/**
 * Makes test/fixtures/stories260K-golden.json: llama.cpp's reference outputs on the default model, through
 * node-llama-cpp (CPU, 1 thread, no download or build of llama.cpp). Greedy decoding from BOS (255 tokens, or to
 * BOS/EOS) and the token ids of 40 strings: llama.cpp's tests/test-tokenizer-0 convention (add_special=false,
 * parse_special=false), and again with special tokens parsed. Run after the build, which converts the model:
 *   npx bun run build && npx bun run scripts/make-golden.ts [out.json]
 * The file is JSON.stringify(golden, null, 1) with no newline at the end, so a rerun that changes nothing leaves
 * `git diff` empty.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const ROOT = join(import.meta.dir, "..");
const MODEL = join(ROOT, "build", "default-model.gguf");
const OUT = process.argv[2] ?? join(ROOT, "test", "fixtures", "stories260K-golden.json");
const GREEDY_STEPS = 255;

/** llama.cpp's tokenizer test strings (tests/test-tokenizer-0.py) and a few story sentences */
const STRINGS = [
  "Once upon a time",
  "Lily and Tom went to the park.",
  "Hello world",
  "  leading spaces",
  "émoji 🦙 and 中文",
  "ied 4 ½ months",
  "Äpfel",
  "",
  " ",
  "  ",
  "   ",
  "\t",
  "\n",
  "\n\n",
  "\n\n\n",
  "\t\n",
  "Hello world",
  " Hello world",
  "Hello World",
  " Hello World",
  " Hello World!",
  "Hello, world!",
  " Hello, world!",
  " this is 🦙.cpp",
  "w048 7tuijk dsdfhu",
  "нещо на Български",
  "កាន់តែពិសេសអាចខលចេញ",
  "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
  "Hello",
  " Hello",
  "  Hello",
  "   Hello",
  "    Hello",
  "    Hello\n    Hello",
  " (",
  "\n =",
  "' era",
  "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
  "!!!!!!",
  "3",
];

if (!existsSync(MODEL)) {
  console.error(`make-golden: ${MODEL} is missing (run: npx bun run build)`);
  process.exit(2);
}
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: MODEL });
// threads: node-llama-cpp's default of 4 is hundreds of times slower on a 2-core machine
const context = await model.createContext({ contextSize: 512, batchSize: 512, threads: 1 });
const ids: number[] = [];
for await (const token of context.getSequence().evaluate([model.tokens.bos!], { temperature: 0 })) {
  if (token === model.tokens.eos || token === model.tokens.bos) break;
  ids.push(Number(token));
  if (ids.length === GREEDY_STEPS) break;
}
const version = (JSON.parse(readFileSync(join(ROOT, "node_modules", "node-llama-cpp", "package.json"), "utf8")) as { version: string }).version;
const golden = {
  source: `llama.cpp (node-llama-cpp ${version}) on an F32 GGUF conversion of stories260K.bin + tok512.bin (no Q/K permutation, tied embeddings)`,
  greedyFromBos: { ids, text: model.detokenize(ids.map((i) => i as never)) },
  tokenize: STRINGS.map((text) => ({
    text,
    ids: model.tokenize(text, false).map(Number),
    idsParseSpecial: model.tokenize(text, true).map(Number),
  })),
  notes: "ids = model.tokenize(text, false) (no BOS added, special tokens not parsed; same convention as llama.cpp test-tokenizer-0: add_special=false, parse_special=false). idsParseSpecial = model.tokenize(text, true). greedyFromBos = argmax decoding starting from BOS id 1, stopping at BOS/EOS or 255 tokens; identical to an independent numpy fp64 reimplementation for all 255 tokens.",
};
writeFileSync(OUT, JSON.stringify(golden, null, 1));
console.log(`make-golden: ${OUT} (${ids.length} greedy ids, ${STRINGS.length} tokenizations)`);
await context.dispose();
await model.dispose();
await llama.dispose();
