/**
 * Which chain of stages serve and run-batch build (--pipeline, --stage-config): the pipeline reads this record to
 * build its stages (pipeline/serving-pipeline.ts), no flag names below the command line.
 */

/** Which chain of stages to build: one engine, the built-in prefill/decode pair, or a stage-config file. */
export interface StageChainConfig {
  readonly pipeline: "single" | "pd";
  /** --stage-config (exclusive with --pipeline pd) */
  readonly stageConfigPath: string | null;
}
