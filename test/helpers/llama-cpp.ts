/**
 * llama.cpp (node-llama-cpp) as the numeric oracle, opened one way everywhere: CPU only and never building or
 * downloading anything. Callers still pass `threads` to every context (its default of 4 is 400-1000x slower on 2 cores).
 * @example const llama = await openLlamaCpp(); const model = await llama.loadModel({ modelPath });
 */
import type { ControlledEvaluateIndexOutput, ControlledEvaluateInputItem, Llama, LlamaModel, Token } from "node-llama-cpp";

export async function openLlamaCpp(quiet = false): Promise<Llama> {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  return getLlama({ gpu: false, build: "never", logLevel: quiet ? LlamaLogLevel.disabled : LlamaLogLevel.error });
}

/**
 * Disposes llama.cpp after a file's tests, waiting at most `limitMs`: node-llama-cpp's dispose once hung past the
 * 120 s hook timeout in a full run (test/gguf/make-model.test.ts, every test of the file already passed); the process
 * ends after the suite either way, so a hung dispose must not turn into a failure.
 * @example afterAll(() => disposeLlamaCpp(llama));
 */
export async function disposeLlamaCpp(llama: Llama | null | undefined, limitMs = 10_000): Promise<void> {
  if (llama === null || llama === undefined) return;
  await Promise.race([llama.dispose(), Bun.sleep(limitMs)]);
}

/** What llama.cpp computed along a prompt and its own greedy continuation (llamaCppGreedy). */
export interface LlamaCppGreedyRun {
  readonly promptIds: readonly number[];
  /** llama.cpp's `steps` greedy tokens after the prompt */
  readonly theirs: readonly number[];
  /** the prompt, then the first steps - 1 greedy tokens: every position whose next-token distribution is known */
  readonly all: readonly number[];
  /** [all.length] llama.cpp's full next-token distribution at the checked positions */
  readonly evaluated: readonly (ControlledEvaluateIndexOutput | undefined)[];
  readonly checked: ReadonlySet<number>;
}

export interface LlamaCppGreedyOptions {
  readonly contextSize: number;
  readonly batchSize: number;
  readonly steps: number;
  /** the prompt's token ids, from the loaded model's tokenizer */
  readonly prompt: (model: LlamaModel) => readonly Token[];
  /** the positions whose full distribution is read, given the prompt's length and the length of `all` */
  readonly checked: (promptLength: number, allLength: number) => readonly number[];
  /** keep every position in the sliding-window layers' cache (gemma3) */
  readonly swaFullCache?: boolean;
  /** LoRA adapters applied by the context (llama_set_adapter_lora), each with its user scale */
  readonly lora?: readonly { readonly filePath: string; readonly scale: number }[];
  /**
   * the K and V cache's type (default F32): F16 is llama.cpp's own default (llama_context_default_params), the cache
   * a fast path that stores f16 K/V is compared with
   */
  readonly kvCacheType?: "F32" | "F16";
}

/**
 * The llama.cpp side of a logits cross-check, one way for every test: load the GGUF, a context with an f32 KV cache
 * and no flash attention (llama.cpp's defaults, an f16 cache, would add their own rounding), 1 thread; `steps` greedy
 * tokens (temperature 0) after the prompt; then, from a cleared history, controlledEvaluate along prompt + those tokens
 * with the full softmax (temperature 1, no top-k / top-p / min-p) at the checked positions. Disposes the model.
 * @example const run = await llamaCppGreedy(llama, path, { contextSize: 64, batchSize: 64, steps: 32, prompt, checked });
 */
export async function llamaCppGreedy(llama: Llama, path: string, o: LlamaCppGreedyOptions): Promise<LlamaCppGreedyRun> {
  const model = await llama.loadModel({ modelPath: path });
  try {
    const context = await model.createContext({
      contextSize: o.contextSize, batchSize: o.batchSize, threads: 1, flashAttention: false,
      ...(o.swaFullCache === true ? { swaFullCache: true } : {}),
      ...(o.lora !== undefined ? { lora: { adapters: o.lora.map((l) => ({ ...l })) } } : {}),
      experimentalKvCacheKeyType: o.kvCacheType ?? "F32", experimentalKvCacheValueType: o.kvCacheType ?? "F32",
    });
    try {
      const sequence = context.getSequence();
      const prompt = o.prompt(model);
      const theirs: Token[] = [];
      for await (const token of sequence.evaluate([...prompt], { temperature: 0, yieldEogToken: true })) {
        theirs.push(token);
        if (theirs.length === o.steps) break;
      }
      if (theirs.length !== o.steps) throw new Error(`llama.cpp gave ${theirs.length} of ${o.steps} greedy tokens`);
      await sequence.clearHistory();
      const all = [...prompt, ...theirs.slice(0, o.steps - 1)];
      const checked = new Set(o.checked(prompt.length, all.length));
      const full = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };
      const evaluated = await sequence.controlledEvaluate(all.map((t, i): ControlledEvaluateInputItem => (checked.has(i) ? [t, full] : t)));
      return { promptIds: prompt.map(Number), theirs: theirs.map(Number), all: all.map(Number), evaluated, checked };
    } finally {
      await context.dispose();
    }
  } finally {
    await model.dispose();
  }
}

/** log softmax of one row of logits, in f64 */
export function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const x of logits) if (x > max) max = x;
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (x) => x - lse);
}

/** Largest |log p - log p_llama.cpp| over the tokens llama.cpp gives p > 1e-4 at one position */
export function logprobError(logits: Float32Array, theirs: ControlledEvaluateIndexOutput | undefined): number {
  const probabilities = theirs?.next.probabilities;
  if (probabilities === undefined || probabilities.size !== logits.length) throw new Error("no full distribution from llama.cpp");
  const ours = logSoftmax(logits);
  let worst = 0;
  for (const [id, p] of probabilities) if (p > 1e-4) worst = Math.max(worst, Math.abs(Math.log(p) - ours[id]!));
  return worst;
}

/** The ids llama.cpp's embedding context evaluates for `ids` (it adds BOS / EOS the way llama_tokenize would). */
export function llamaCppEmbeddingInput(model: LlamaModel, ids: readonly number[]): number[] {
  const out = [...ids];
  if (model.tokens.shouldPrependBosToken && model.tokens.bos !== null && out[0] !== Number(model.tokens.bos)) out.unshift(Number(model.tokens.bos));
  if (model.tokens.shouldAppendEosToken && model.tokens.eos !== null && out.at(-1) !== Number(model.tokens.eos)) out.push(Number(model.tokens.eos));
  return out;
}
