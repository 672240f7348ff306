/**
 * `run-batch`'s flags as one typed config (vLLM's `vllm run-batch`): the batch files, the engine's arguments, the
 * stages, structured outputs and the stats flags.
 */
import type { EngineArgs } from "../config/engine-args.ts";
import type { StageChainConfig } from "../config/stage-chain-config.ts";
import { structuredOutputsConfig, type StructuredOutputsSettings } from "../config/structured-outputs-config.ts";
import { err, ok, type Result } from "../util/result.ts";
import { chatTemplateFlags, type ChatTemplateFlags } from "./chat-template-flags.ts";
import { engineConfig } from "./engine-config.ts";
import { vllmFates } from "./fate-notes.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";
import type { MetricsConfig } from "./serve-config.ts";
import { stageChainConfig } from "./stage-chain-flags.ts";

export interface RunBatchConfig {
  readonly model: string | null;
  readonly engine: EngineArgs;
  readonly warnings: readonly string[];
  readonly metrics: Pick<MetricsConfig, "disableLogStats" | "logStats">;
  readonly stages: StageChainConfig;
  readonly inputFile: string;
  readonly outputFile: string;
  readonly structuredOutputs: StructuredOutputsSettings;
  /** the chat-template, tool-calling and reasoning flags (checked by commands/chat-flags.ts) */
  readonly chat: ChatTemplateFlags;
}

/** `run-batch`'s flags as one typed config; both files are required. */
export function runBatchConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<RunBatchConfig> {
  const inputFile = stringOrNull(options["input-file"]);
  const outputFile = stringOrNull(options["output-file"]);
  if (inputFile === null) return err("run-batch needs -i/--input-file (an OpenAI batch JSONL file)");
  if (outputFile === null) return err("run-batch needs -o/--output-file");
  const stages = stageChainConfig(options);
  if (!stages.ok) return stages;
  const engine = engineConfig(options, env, "batch-runner");
  if (!engine.ok) return engine;
  const notes = vllmFates("run-batch", options);
  if (!notes.ok) return notes;
  const structuredOutputs = structuredOutputsConfig(stringOrNull(options["structured-outputs-config"]));
  if (!structuredOutputs.ok) return structuredOutputs;
  return ok({
    model: stringOrNull(options.model), engine: engine.value.engine, warnings: [...notes.value, ...engine.value.warnings], stages: stages.value, inputFile, outputFile,
    structuredOutputs: structuredOutputs.value,
    chat: chatTemplateFlags(options),
    metrics: { disableLogStats: options["disable-log-stats"] === true, logStats: options["log-stats"] === true },
  });
}
