/**
 * llama.cpp's greedy continuation of a prompt and its full distribution at every step, teacher-forced along a given
 * token path (or its own greedy one): what bench/server-logits.ts and bench/experiments/llamacpp-spread.ts score against.
 */
import type { Llama, LlamaContextOptions, Token } from "node-llama-cpp";

export interface LlamaCppSteps {
  /** prompt + the greedy continuation but its last token: the positions scored */
  readonly path: readonly Token[];
  readonly promptLength: number;
  /** the greedy continuation, `steps` tokens */
  readonly greedy: readonly Token[];
  /** [position] -> token -> probability of the next token (temperature 1, no truncation); empty before the prompt's last */
  readonly next: readonly ReadonlyMap<Token, number>[];
}

const FULL = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };

/** Loads `modelPath`, continues `promptText` greedily for `steps` tokens (or scores `along`), disposes it. */
export async function llamaCppSteps(
  llama: Llama, modelPath: string, context: Omit<LlamaContextOptions, "contextSize" | "batchSize">, promptText: string,
  steps: number, along?: Pick<LlamaCppSteps, "path" | "promptLength" | "greedy">,
): Promise<LlamaCppSteps> {
  const model = await llama.loadModel({ modelPath });
  const ctx = await model.createContext({ contextSize: 128, batchSize: 128, ...context });
  const sequence = ctx.getSequence();
  let fixed = along;
  if (fixed === undefined) {
    const prompt = [...(model.tokens.bos !== null ? [model.tokens.bos] : []), ...model.tokenize(promptText)];
    const greedy: Token[] = [];
    for await (const token of sequence.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
      greedy.push(token);
      if (greedy.length === steps) break;
    }
    await sequence.clearHistory();
    fixed = { path: [...prompt, ...greedy.slice(0, steps - 1)], promptLength: prompt.length, greedy };
  }
  const { path, promptLength } = fixed;
  const evaluated = await sequence.controlledEvaluate(path.map((t, i) => (i >= promptLength - 1 ? [t, FULL] : t)) as never);
  const next = path.map((_, pos) => (evaluated[pos] as { next?: { probabilities?: Map<Token, number> } } | undefined)?.next?.probabilities ?? new Map<Token, number>());
  await ctx.dispose();
  await model.dispose();
  return { ...fixed, next };
}
