/**
 * `--speculative-config` and vLLM's --spec-* shortcut flags merged into one SpeculativeConfig (vLLM's
 * EngineArgs.create_speculative_config); the keys are then checked by config/speculative-config.ts.
 */
import { parseSpeculativeConfig, type SpeculativeConfig } from "../config/speculative-config.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";

/** vLLM's shortcut flags and the config keys they set */
const SHORTCUTS = [["spec-method", "method"], ["spec-model", "model"], ["spec-tokens", "num_speculative_tokens"]] as const;

/**
 * The speculative config the command line asks for (--speculative-config plus the --spec-* shortcuts), null when
 * none. Options are the parsed flags (parse-args.ts).
 * @example speculativeConfigFromFlags({ "spec-method": "ngram", "spec-tokens": 3 }) // ok: ngram, k 3
 */
export function speculativeConfigFromFlags(options: Options): Result<SpeculativeConfig | null> {
  const text = options["speculative-config"];
  let raw: Record<string, unknown> = {};
  if (typeof text === "string") {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      return err(`--speculative-config is not valid JSON (${e instanceof Error ? e.message : String(e)}); e.g. '{"method": "ngram", "num_speculative_tokens": 4}'`);
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return err("--speculative-config must be a JSON object, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
    for (const [k, v] of Object.entries(parsed)) raw[k.replaceAll("-", "_")] = v;
  }
  let any = typeof text === "string";
  for (const [flag, key] of SHORTCUTS) {
    const v = options[flag];
    if (v === null || v === undefined) continue;
    if (key in raw) return err(`--${flag} and --speculative-config['${key}'] are mutually exclusive`);
    raw = { ...raw, [key]: v };
    any = true;
  }
  return any ? parseSpeculativeConfig(raw) : ok(null);
}
