/**
 * --pipeline and --stage-config -> the StageChainConfig record the pipeline builds its stages from.
 */
import type { StageChainConfig } from "../config/stage-chain-config.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

/** serve's and run-batch's chain of stages; pd and a stage-config file are exclusive. */
export function stageChainConfig(options: Options): Result<StageChainConfig> {
  const stageConfigPath = stringOrNull(options["stage-config"]);
  const pipeline = options.pipeline === "pd" ? "pd" : "single";
  if (stageConfigPath !== null && pipeline === "pd") return err("--pipeline pd and --stage-config are exclusive (pd is a two-stage config)");
  return ok({ pipeline, stageConfigPath });
}
