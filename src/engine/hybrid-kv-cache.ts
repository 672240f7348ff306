/**
 * Whether an engine runs vLLM's hybrid KV cache manager (model/kv-cache-groups.ts) and with which groups. A model with
 * sliding-window layers gets it unless --disable-hybrid-kv-cache-manager says no or a feature that moves or shares
 * whole blocks of every layer is on; then, as vLLM does (vllm/config/vllm.py: "Turning off hybrid kv cache manager
 * because `--kv-transfer-config` is set"), it is turned off for the run with one log line and every layer keeps every
 * block. A model without sliding layers has one group either way, silently: today's single block table.
 */
import { hasSlidingLayers, kvCacheGroups, singleKvCacheGroup, type KvCacheGroups } from "../model/kv-cache-groups.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { EngineArgs } from "./protocol.ts";

export interface HybridKvCacheChoice {
  readonly groups: KvCacheGroups;
  /** why the hybrid manager is off for a model that could use it (one start-up line); null when on or not applicable */
  readonly offLine: string | null;
}

type HybridArgs = Pick<EngineArgs, "disableHybridKvCacheManager" | "kvOffload" | "kvPeer" | "speculativeConfig">;

/** What turns the hybrid manager off for this run, or null (the first reason wins). */
function offReason(args: HybridArgs, numMemories: number): string | null {
  if (args.disableHybridKvCacheManager === true) return "Hybrid KV cache manager disabled by --disable-hybrid-kv-cache-manager";
  // the offload tier and the P/D connector read, store and send whole blocks of every layer by one block id
  if (args.kvOffload) return `Turning off hybrid kv cache manager because ${args.kvOffload.kvOffloadingSize !== null ? "`--kv-offloading-size`" : "`--kv-transfer-config`"} is set (the KV offload tier moves whole blocks of every layer)`;
  if (args.kvPeer) return "Turning off hybrid kv cache manager because `--kv-transfer-config` is set (NixlConnector sends whole blocks of every layer)";
  // the draft model's KV cache uses the target's block ids, one table for all its layers
  if (args.speculativeConfig?.method === "draft_model") return "Turning off hybrid kv cache manager because the draft model of `--speculative-config` shares the target's block ids";
  // the split backend places layers (and their KV) per memory: a group's slot holds layers of several memories
  if (numMemories > 1) return `Turning off hybrid kv cache manager because the model is spread over ${numMemories} wasm32 memories`;
  return null;
}

/** The KV cache groups for this run (`numMemories`: how many wasm32 memories the model is placed over; 1 otherwise). */
export function chooseKvCacheGroups(config: ModelConfig, args: HybridArgs, numMemories = 1): HybridKvCacheChoice {
  if (!hasSlidingLayers(config)) return { groups: singleKvCacheGroup(config.numLayers), offLine: null };
  const reason = offReason(args, numMemories);
  if (reason !== null) {
    return { groups: singleKvCacheGroup(config.numLayers), offLine: `${reason}: sliding-window layers keep every KV block (their attention still skips the keys behind the window)` };
  }
  return { groups: kvCacheGroups(config), offLine: null };
}
