/**
 * Which served models a LoRA adapter file fits, for a runtime load on a server of several models: the checks the
 * engine makes when it loads an adapter (lora/read-lora-adapter.ts, after llama-adapter.cpp llama_adapter_lora_init_impl:
 * the architecture, every tensor pair's shapes against the base's, the rank under --max-lora-rank) made against each
 * model's GGUF metadata, before any model is loaded. Each model's config is read once (its file is mapped, its weights
 * untouched).
 * @example const fit = loraFits("/a/sql.gguf", [{ name: "m1", path: "/m/m1.gguf", maxLoraRank: 16 }]);
 */
import { readGguf } from "../gguf/reader.ts";
import { parseLoraAdapter } from "../lora/read-lora-adapter.ts";
import type { ModelConfig } from "../model/model-config.ts";
import { readModelConfig } from "../model/read-model-config.ts";
import type { Result } from "../util/result.ts";

export interface LoraBaseCandidate {
  /** the model's served name */
  readonly name: string;
  /** its GGUF file */
  readonly path: string;
  /** its --max-lora-rank */
  readonly maxLoraRank: number;
}

export interface LoraFit {
  /** the models the adapter fits, in the order given */
  readonly fits: readonly string[];
  /** why it fits none of the others: one line per model */
  readonly misfits: readonly { readonly model: string; readonly reason: string }[];
}

const configs = new Map<string, Result<ModelConfig>>();

function configOf(path: string): Result<ModelConfig> {
  let config = configs.get(path);
  if (config === undefined) {
    const file = readGguf(path);
    config = file.ok ? readModelConfig(file.value) : file;
    configs.set(path, config);
  }
  return config;
}

/** The candidates `adapterPath` fits; an unreadable adapter is the Result's error (one line). */
export function loraFits(adapterPath: string, candidates: readonly LoraBaseCandidate[]): Result<LoraFit> {
  const adapter = readGguf(adapterPath);
  if (!adapter.ok) return { ok: false, error: `LoRA adapter ${adapter.error}` };
  const fits: string[] = [];
  const misfits: { model: string; reason: string }[] = [];
  for (const c of candidates) {
    const config = configOf(c.path);
    if (!config.ok) { misfits.push({ model: c.name, reason: config.error }); continue; }
    const checked = parseLoraAdapter(adapter.value, { config: config.value, maxLoraRank: c.maxLoraRank });
    if (checked.ok) fits.push(c.name);
    else misfits.push({ model: c.name, reason: checked.error });
  }
  return { ok: true, value: { fits, misfits } };
}
