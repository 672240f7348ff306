/**
 * The prompts of `fennec bench`: vLLM's random dataset (random token ids, lengths drawn from
 * [len*(1-r), len*(1+r)], an optional shared random prefix; vllm/benchmarks/datasets.py RandomDataset) and ShareGPT
 * conversations (first human turn as prompt, the answer's length as output length, vLLM's length filter). Seeded: the
 * same --seed gives the same prompts. Also used by bench/throughput.ts.
 */
import { readFileSync } from "node:fs";
import { createRng, type Rng } from "../engine/rng.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError } from "../util/cli-error.ts";

export interface BenchPrompt {
  readonly promptIds: readonly number[];
  /** the prompt as text (the ids decoded), for servers that only take text */
  readonly prompt: string;
  readonly outputLen: number;
}

export interface RandomDatasetArgs {
  readonly numPrompts: number;
  readonly inputLen: number;
  readonly outputLen: number;
  readonly rangeRatio: number;
  readonly prefixLen: number;
  readonly seed: number;
}

/** ids in [low, vocab): the lowest ids are often special or byte tokens */
function randomIds(rng: Rng, count: number, vocabSize: number): number[] {
  const low = Math.min(300, Math.floor(vocabSize / 2));
  return Array.from({ length: count }, () => low + (rng.nextUint32() % (vocabSize - low)));
}

const lengthIn = (rng: Rng, len: number, ratio: number): number => {
  const lo = Math.max(1, Math.floor(len * (1 - ratio)));
  const hi = Math.max(lo, Math.ceil(len * (1 + ratio)));
  return lo + (rng.nextUint32() % (hi - lo + 1));
};

/** Random token prompts; `decode` turns ids into text (null: no text needed, the engine takes ids). */
export function randomDataset(args: RandomDatasetArgs, vocabSize: number, decode: ((ids: readonly number[]) => string) | null): BenchPrompt[] {
  const rng = createRng(args.seed);
  const prefix = randomIds(rng, args.prefixLen, vocabSize);
  return Array.from({ length: args.numPrompts }, () => {
    const ids = [...prefix, ...randomIds(rng, lengthIn(rng, args.inputLen, args.rangeRatio), vocabSize)];
    return { promptIds: ids, prompt: decode === null ? "" : decode(ids), outputLen: lengthIn(rng, args.outputLen, args.rangeRatio) };
  });
}

interface ShareGptEntry { conversations?: { from?: string; value?: string }[] }

/** ShareGPT JSON: vLLM keeps prompts of 4..1024 tokens with outputs of 4+ tokens and a total of at most 2048. */
export function shareGptDataset(path: string, numPrompts: number, tokenizer: Tokenizer, fixedOutputLen: number | null, seed: number): BenchPrompt[] {
  let entries: ShareGptEntry[];
  try {
    entries = JSON.parse(readFileSync(path, "utf8")) as ShareGptEntry[];
  } catch (e) {
    throw new CliError(`--dataset-path ${path}: cannot read a ShareGPT JSON file (${e instanceof Error ? e.message : String(e)})`);
  }
  if (!Array.isArray(entries)) throw new CliError(`--dataset-path ${path}: a ShareGPT file is a JSON array of {"conversations": [...]}`);
  const rng = createRng(seed);
  const order = entries.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.nextUint32() % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const out: BenchPrompt[] = [];
  for (const i of order) {
    if (out.length >= numPrompts) break;
    const turns = entries[i]?.conversations;
    if (!Array.isArray(turns) || turns.length < 2 || typeof turns[0]?.value !== "string" || typeof turns[1]?.value !== "string") continue;
    const promptIds = tokenizer.encode(turns[0].value, { addSpecial: false, parseSpecial: false });
    const outputLen = fixedOutputLen ?? tokenizer.encode(turns[1].value, { addSpecial: false, parseSpecial: false }).length;
    if (promptIds.length < 4 || outputLen < 4 || promptIds.length > 1024 || promptIds.length + outputLen > 2048) continue;
    out.push({ promptIds, prompt: turns[0].value, outputLen });
  }
  if (out.length === 0) throw new CliError(`--dataset-path ${path}: no usable conversation (prompts of 4..1024 tokens, answers of 4+ tokens)`);
  return out;
}
