/**
 * The WASM fast path's logits with a LoRA adapter in slot 1 of 2 (Runner on 2 threads): the prompt as one prefill, then
 * one decode step per token along `all`; one row per position from the prompt's last on.
 */
import { createBackend } from "../../src/backend/create-backend.ts";
import type { LoraAdapter } from "../../src/lora/lora-adapter.ts";
import type { ModelConfig } from "../../src/model/model-config.ts";
import { Runner } from "../../src/model/runner.ts";
import type { ModelWeights } from "../../src/model/weights.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { teacherForcedLogits } from "../helpers/teacher-forced.ts";

export async function fastLoraLogits(config: ModelConfig, weights: ModelWeights, adapter: LoraAdapter, userScale: number, all: readonly number[], promptLength: number): Promise<Float32Array[]> {
  await ensureKernels();
  const runner = new Runner(config, weights, await createBackend({ kind: "wasm", threads: 2 }));
  try {
    runner.allocateKvCache(Math.ceil(all.length / 16), 16);
    runner.enableLora(2);
    runner.loadLora(1, adapter, userScale);
    return await teacherForcedLogits(runner, all, promptLength, { loraSlot: 1 });
  } finally {
    runner.dispose();
  }
}
