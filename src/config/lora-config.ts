/**
 * vLLM's LoRAConfig as fennec serves it (vllm/config/lora.py, vllm/entrypoints/openai/cli_args.py LoRAParserAction):
 * --enable-lora, --lora-modules (name=path, or JSON {"name", "path", "base_model_name"}), --max-loras (adapters in one
 * step, default 1), --max-lora-rank (default 16), --max-cpu-loras (parsed adapters kept in host memory, default
 * max_loras, at least max_loras).
 */
import { existsSync } from "node:fs";
import { err, ok, type Result } from "../util/result.ts";

/** One --lora-modules entry (vLLM LoRAModulePath). */
export interface LoraModule {
  readonly name: string;
  readonly path: string;
  /** the base model it names (vLLM: shown as the card's parent); null: the served model */
  readonly baseModelName: string | null;
}

export interface LoraConfig {
  readonly maxLoras: number;
  readonly maxLoraRank: number;
  readonly maxCpuLoras: number;
  readonly modules: readonly LoraModule[];
}

/**
 * The lora_int_id of the i-th --lora-modules entry: vLLM's OpenAIServingModels loads the static modules in order, each
 * taking lora_id_counter.inc(1) (the counter starts at 0), so they are 1..n and runtime loads continue from n + 1.
 */
export function staticLoraIntId(index: number): number {
  return index + 1;
}

/** vLLM's defaults */
export const DEFAULT_MAX_LORAS = 1;
export const DEFAULT_MAX_LORA_RANK = 16;
/** vLLM's allowed ranks (LoRAConfig.max_lora_rank: MaxLoRARanks) */
export const LORA_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512] as const;

/**
 * One --lora-modules value, as vLLM's LoRAParserAction reads it: JSON when it parses as an object, else name=path.
 * @example parseLoraModule('{"name": "sql", "path": "/a/sql.gguf", "base_model_name": "m"}')
 */
export function parseLoraModule(text: string): Result<LoraModule> {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch (e) {
      return err(`--lora-modules: invalid JSON ${JSON.stringify(text)} (${e instanceof Error ? e.message : String(e)})`);
    }
    const o = parsed as Record<string, unknown>;
    const known = new Set(["name", "path", "base_model_name"]);
    const unknown = Object.keys(o).filter((k) => !known.has(k));
    if (unknown.length > 0) return err(`--lora-modules: unknown field${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} in ${JSON.stringify(text)} (fields: name, path, base_model_name)`);
    if (typeof o.name !== "string" || o.name === "" || typeof o.path !== "string" || o.path === "") return err(`--lora-modules: ${JSON.stringify(text)} needs "name" and "path" strings`);
    if (o.base_model_name !== undefined && o.base_model_name !== null && typeof o.base_model_name !== "string") return err(`--lora-modules: base_model_name must be a string in ${JSON.stringify(text)}`);
    return ok({ name: o.name, path: o.path, baseModelName: (o.base_model_name as string | null | undefined) ?? null });
  }
  const eq = trimmed.indexOf("=");
  if (eq <= 0 || eq === trimmed.length - 1) return err(`--lora-modules: expected name=path or a JSON object, got ${JSON.stringify(text)}`);
  return ok({ name: trimmed.slice(0, eq), path: trimmed.slice(eq + 1), baseModelName: null });
}

export interface LoraFlags {
  readonly enableLora: boolean;
  readonly modules: readonly string[];
  readonly maxLoras: number | null;
  readonly maxLoraRank: number | null;
  readonly maxCpuLoras: number | null;
}

/** The LoRA flags as one config (null without --enable-lora), checked as vLLM checks them. */
export function loraConfig(f: LoraFlags): Result<LoraConfig | null> {
  if (!f.enableLora) {
    const given = f.modules.length > 0 ? "--lora-modules" : f.maxLoras !== null ? "--max-loras" : f.maxLoraRank !== null ? "--max-lora-rank" : f.maxCpuLoras !== null ? "--max-cpu-loras" : null;
    return given === null ? ok(null) : err(`${given} needs --enable-lora`);
  }
  const maxLoras = f.maxLoras ?? DEFAULT_MAX_LORAS;
  const maxLoraRank = f.maxLoraRank ?? DEFAULT_MAX_LORA_RANK;
  if (!(LORA_RANKS as readonly number[]).includes(maxLoraRank)) return err(`--max-lora-rank must be one of ${LORA_RANKS.join(", ")} (got ${maxLoraRank})`);
  const maxCpuLoras = f.maxCpuLoras ?? maxLoras;
  // vllm/config/lora.py verify_with_scheduler_config
  if (maxCpuLoras < maxLoras) return err(`max_cpu_loras (${maxCpuLoras}) must be >= max_loras (${maxLoras})`);
  const modules: LoraModule[] = [];
  for (const text of f.modules) {
    const m = parseLoraModule(text);
    if (!m.ok) return m;
    if (modules.some((x) => x.name === m.value.name)) return err(`--lora-modules: the name ${m.value.name} is given twice`);
    // vLLM fails the start-up on a static module it cannot load; a missing file is known before the model loads
    if (!existsSync(m.value.path)) return err(`--lora-modules ${m.value.name}: no adapter file at ${m.value.path}`);
    modules.push(m.value);
  }
  return ok({ maxLoras, maxLoraRank, maxCpuLoras, modules });
}
