/**
 * The fast path (a Runner) teacher-forced along a token sequence, as the llama.cpp cross-checks drive it: the first
 * promptLength tokens as one prefill, then one decode step per token. Row i of the result is the next-token logits at
 * position promptLength - 1 + i. `sequence` adds to every step's sequence (block tables of the hybrid KV cache
 * groups, a LoRA slot); the default block table is blocks 0, 1, ... of 16 tokens.
 * @example const rows = await teacherForcedLogits(runner, all, promptIds.length);
 */
import type { SequenceChunk } from "../../src/model/model-batch.ts";
import type { Runner } from "../../src/model/runner.ts";

export async function teacherForcedLogits(runner: Runner, all: readonly number[], promptLength: number,
  sequence: Partial<Pick<SequenceChunk, "blockTable" | "blockTables" | "loraSlot">> = {}): Promise<Float32Array[]> {
  const blockTable = sequence.blockTable ?? Int32Array.from({ length: Math.ceil(all.length / 16) }, (_, i) => i);
  const step = async (start: number, end: number) =>
    (await runner.execute({ sequences: [{ ...sequence, tokenIds: Int32Array.from(all.slice(start, end)), startPos: start, blockTable, logits: "last" }] })).logits;
  const rows = [await step(0, promptLength)];
  for (let pos = promptLength; pos < all.length; pos++) rows.push(await step(pos, pos + 1));
  return rows;
}
