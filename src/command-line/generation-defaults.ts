/**
 * serve's --generation-config and --override-generation-config: the defaults of the sampling fields a request omits
 * (vLLM's ModelConfig.get_diff_sampling_param), as vLLM's keys.
 */
import { readFileSync } from "node:fs";
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

const GENERATION_KEYS = ["temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_new_tokens"] as const;

/**
 * The numbers of vLLM's default_sampling_params keys in an object. A model folder's generation_config.json holds
 * other keys (bos_token_id, do_sample, ...) that vLLM drops, so they are dropped; in --override-generation-config an
 * unknown key would be a setting that does nothing, so it is refused naming the key (`strict`).
 */
function generationNumbers(source: string, value: unknown, strict = false): Result<Record<string, number>> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return err(`${source}: expected a JSON object`);
  const unknown = Object.keys(value).filter((k) => !(GENERATION_KEYS as readonly string[]).includes(k));
  if (strict && unknown.length > 0) return err(`${source}: unknown key${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} (the keys vLLM applies: ${GENERATION_KEYS.join(", ")})`);
  const out: Record<string, number> = {};
  for (const key of GENERATION_KEYS) {
    const v = (value as Record<string, unknown>)[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isFinite(v)) return err(`${source}: ${key} must be a number (got ${JSON.stringify(v)})`);
    out[key] = v;
  }
  return ok(out);
}

/** --generation-config auto|vllm|FOLDER, then --override-generation-config over it (vLLM's get_diff_sampling_param). */
export function generationDefaults(options: Options): Result<Record<string, number>> {
  const source = stringOrNull(options["generation-config"]) ?? "auto";
  let base: Record<string, number> = {};
  // auto reads the model's generation_config.json; a GGUF file carries none, so vLLM's own defaults apply, as with vllm
  if (source !== "auto" && source !== "vllm") {
    const file = `${source.replace(/\/$/, "")}/generation_config.json`;
    let parsed: unknown;
    try { parsed = JSON.parse(readFileSync(file, "utf8")); } catch (e) { return err(`--generation-config ${source}: cannot read ${file} (${e instanceof Error ? e.message.split("\n")[0] : String(e)})`); }
    const numbers = generationNumbers(file, parsed);
    if (!numbers.ok) return numbers;
    base = numbers.value;
  }
  const override = stringOrNull(options["override-generation-config"]);
  if (override === null) return ok(base);
  let parsed: unknown;
  try { parsed = JSON.parse(override); } catch { return err(`--override-generation-config must be a JSON object, e.g. '{"temperature": 0.5}' (got ${override})`); }
  const numbers = generationNumbers("--override-generation-config", parsed, true);
  return numbers.ok ? ok({ ...base, ...numbers.value }) : numbers;
}
