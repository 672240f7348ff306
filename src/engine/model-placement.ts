/**
 * Start-up memory accounting for the CPU backend: sizes the KV pool the flags ask for (engine-sizing.ts kvPoolBlocks, the
 * same sizing the engine then applies), plans the model over wasm32 memories (one when it fits, else a range of
 * layers per memory: backend/wasm/memory-plan.ts) and checks the whole against the machine, before any large
 * allocation. One line says what was placed where.
 * @example const p = placeModel(model.config, model.weights, args); if (!p.ok) return p; log(p.value.line);
 */
import { freemem, totalmem } from "node:os";
import { kvCacheBytesPerToken, planMemories, WASM32_MEMORY_BYTES, type MemoryPlan, type PlannedWeight } from "../backend/create-backend.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { ModelWeights } from "../model/weights.ts";
import { err, ok, type Result } from "../util/result.ts";
import { kvPoolBlocks, maxRequestBlocks, promptLogprobRowsFor, stepTokenBudget } from "./engine-sizing.ts";
import { chooseKvCacheGroups } from "./hybrid-kv-cache.ts";
import type { EngineArgs } from "./protocol.ts";

/** Caps one wasm memory's size (bytes, or 512M / 1.5G): forces a split of a small model, for tests. */
export const MEMORY_CAP_ENV = "FENNEC_WASM_MEMORY_BYTES";

export interface ModelPlacement {
  readonly plan: MemoryPlan;
  /** the start-up log line */
  readonly line: string;
  /** weights and activations over all memories (what --gpu-memory-utilization's share holds besides the KV pool) */
  readonly modelBytes: number;
  /** the KV blocks the memories were planned for */
  readonly kvBlocks: number;
  /** wasm32 memories the model is spread over */
  readonly numMemories: number;
}

/** Every distinct weight tensor (a tied output counts once). */
function distinctWeights(weights: ModelWeights): ModelWeights["tokenEmbd"][] {
  const all = new Set<ModelWeights["tokenEmbd"]>([weights.tokenEmbd, weights.output, weights.outputNorm]);
  for (const layer of weights.layers) for (const w of Object.values(layer)) if (w !== null) all.add(w);
  return [...all];
}

/**
 * Bytes of the forward pass's buffers for the largest step (forward.ts Scratch, plus the backend's quantized
 * activations and attention scratch), in each memory.
 */
function activationBytes(c: ModelConfig, args: EngineArgs): number {
  const n = stepTokenBudget(args, c, args.maxModelLen ?? c.contextLength);
  const drafts = args.speculativeConfig?.numSpeculativeTokens ?? 0;
  const m = Math.min(n, args.maxNumSeqs * (1 + drafts) + promptLogprobRowsFor(c.vocabSize));
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const floatsPerToken = 3 * c.dim + 2 * Math.max(c.dim, qDim) + 2 * qDim + 4 * kvDim + 3 * c.hiddenDim;
  const quantizedPerToken = 4 * c.hiddenDim; // int8 (+ int16 for q8_0) rows and their scales, kernels/quantize.ts
  return (n * floatsPerToken + m * (2 * c.dim + c.vocabSize)) * 4 + n * quantizedPerToken + 4 * 2 ** 20;
}

/** "268435456", "512M", "1.5G" (binary units) -> bytes, or null */
function parseByteSize(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)i?B?$/i.exec(text.trim());
  if (m === null) return null;
  const unit = { "": 1, K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 }[m[2]!.toUpperCase() as "" | "K" | "M" | "G"];
  return Math.floor(Number(m[1]) * unit);
}

/** GiB with 2 decimals, or MiB below 1 GiB (small models) */
const gib = (bytes: number): string => (bytes >= 2 ** 30 || bytes === 0 ? `${(bytes / 2 ** 30).toFixed(2)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`);

export function placeModel(config: ModelConfig, weights: ModelWeights, args: EngineArgs, env: Record<string, string | undefined> = process.env,
  freeMemoryBytes = freemem(), totalMemoryBytes = totalmem()): Result<ModelPlacement> {
  let memoryBytes = WASM32_MEMORY_BYTES;
  const cap = env[MEMORY_CAP_ENV];
  if (cap !== undefined && cap !== "") {
    const parsed = parseByteSize(cap);
    if (parsed === null || parsed < 2 ** 20 || parsed > WASM32_MEMORY_BYTES) return err(`${MEMORY_CAP_ENV}=${cap} is not a memory size between 1M and 4G`);
    memoryBytes = parsed;
  }
  const dtype = args.kvCacheDtype === "fp8" || args.kvCacheDtype === "fp8_e4m3" ? "q8" : "f16";
  const maxModelLen = Math.min(args.maxModelLen ?? config.contextLength, config.contextLength);
  const tensors: PlannedWeight[] = distinctWeights(weights).map((w) => ({ name: w.name, type: w.type, rows: w.rows, cols: w.cols }));
  const reserveBytes = activationBytes(config, args);
  // weights first, without the KV pool, for --gpu-memory-utilization's share (what the weights leave)
  const bare = planMemories({ tensors, numLayers: config.numLayers, kvBytesPerLayer: 0, reserveBytes, memoryBytes });
  if (!bare.ok) return bare;
  const weightBytes = bare.value.weightBytes.reduce((a, b) => a + b, 0);
  const blocks = args.numKvBlocksOverride ?? null;
  // the KV pool for the memories the weights need, then again if the pool itself needs more memories (each holds activations)
  let numMemories = bare.value.numMemories;
  for (;;) {
    // the hybrid KV cache manager's block holds one group's layers (hybrid-kv-cache.ts); it is off over several memories
    const { groups } = chooseKvCacheGroups(config, args, numMemories);
    const bytesPerBlock = args.blockSize * kvCacheBytesPerToken({ numLayers: groups.groupSize, numKvHeads: config.numKvHeads, headDim: config.headDim, dtype });
    const modelBytes = weightBytes + reserveBytes * numMemories;
    const numBlocks: Result<number> = blocks !== null ? ok(blocks) : kvPoolBlocks(args, {
      bytesPerBlock, maxUsefulBlocks: args.maxNumSeqs * maxRequestBlocks(groups, maxModelLen, args.blockSize, stepTokenBudget(args, config, maxModelLen)), freeMemoryBytes, totalMemoryBytes, modelBytes,
    });
    if (!numBlocks.ok) return numBlocks;
    const kvBytes = numBlocks.value * bytesPerBlock;
    if (modelBytes + kvBytes > totalMemoryBytes) return err(tooLarge(weightBytes, kvBytes, reserveBytes * numMemories, totalMemoryBytes));
    const planned = planMemories({ tensors, numLayers: config.numLayers, kvBytesPerLayer: kvBytes / config.numLayers, reserveBytes, memoryBytes });
    if (!planned.ok) return planned;
    if (planned.value.numMemories > numMemories) {
      numMemories = planned.value.numMemories;
      continue;
    }
    return describe(config, args, planned.value, { weightBytes, kvBytes, reserveBytes, totalMemoryBytes, numBlocks: numBlocks.value });
  }
}

function tooLarge(weightBytes: number, kvBytes: number, activationBytes: number, totalMemoryBytes: number): string {
  return `this model needs ${gib(weightBytes + kvBytes + activationBytes)} (${gib(weightBytes)} of weights, ${gib(kvBytes)} of KV cache, ${gib(activationBytes)} of activations) and this machine has ${gib(totalMemoryBytes)}; lower --kv-cache-memory or --max-num-batched-tokens, or use a smaller quantization`;
}

function describe(config: ModelConfig, args: EngineArgs, plan: MemoryPlan, sizes: { weightBytes: number; kvBytes: number; reserveBytes: number; totalMemoryBytes: number; numBlocks: number }): Result<ModelPlacement> {
  const { weightBytes, kvBytes, reserveBytes, totalMemoryBytes, numBlocks } = sizes;
  const memoryBytes = plan.memoryBytes;
  const modelBytes = weightBytes + reserveBytes * plan.numMemories;
  if (modelBytes + kvBytes > totalMemoryBytes) return err(tooLarge(weightBytes, kvBytes, reserveBytes * plan.numMemories, totalMemoryBytes));
  const parts = plan.firstLayer.map((first, m) => {
    const end = plan.firstLayer[m + 1] ?? config.numLayers;
    return `#${m} ${end - first === 1 ? `layer ${first}` : `layers ${first}-${end - 1}`}: ${gib(plan.weightBytes[m]!)} weights + ${gib((kvBytes * (end - first)) / config.numLayers)} KV`;
  });
  const memories = plan.numMemories === 1 ? "1 wasm32 memory" : `${plan.numMemories} wasm32 memories of at most ${gib(memoryBytes)}`;
  const line = `memory: ${memories}; ${parts.join("; ")}; ${gib(reserveBytes)} activations per memory; ${numBlocks} KV blocks of ${args.blockSize} tokens`;
  return ok({ plan, line, modelBytes, kvBlocks: numBlocks, numMemories: plan.numMemories });
}
