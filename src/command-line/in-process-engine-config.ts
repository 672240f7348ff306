/**
 * The engine that runs in the command's own process (bench throughput / latency, chat without --url): the model and
 * the engine flags as EngineArgs.
 */
import type { EngineArgs } from "../config/engine-args.ts";
import { ok, type Result } from "../util/result.ts";
import { engineConfig, type EngineUsage } from "./engine-config.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

/** The model and engine arguments of an in-process engine. */
export interface InProcessEngineConfig {
  /** the GGUF file; null: the embedded default model */
  readonly model: string | null;
  readonly engine: EngineArgs;
  /** vLLM's start-up warnings about the engine flags */
  readonly warnings: readonly string[];
}

export function inProcessEngineConfig(options: Options, env: Readonly<Record<string, string | undefined>>, usage: EngineUsage = "api-server"): Result<InProcessEngineConfig> {
  const engine = engineConfig(options, env, usage);
  if (!engine.ok) return engine;
  return ok({ model: stringOrNull(options.model), engine: engine.value.engine, warnings: engine.value.warnings });
}
