/**
 * When the `--log-stats` tables are printed (vLLM-Omni: vllm_omni/entrypoints/async_omni.py keeps an aggregator
 * per request online, vllm_omni/entrypoints/omni.py Omni.generate one for the whole batch offline): online, one block per request as soon as it is finalized
 * (e2e_requests = 1, with the `(APIServer pid=N) ` prefix); offline, one block for the whole batch once it has
 * completed (e2e_requests = batch size).
 * @example const sink = onlineTables(2, (t) => process.stdout.write(t)); buildPipeline(chain, factory, { tables: sink });
 */
import type { FinalizedRequest, PipelineStatsSink, RequestStageEvents } from "../pipeline/stage-stats.ts";
import { renderSummary } from "./omni-tables.ts";
import { StageStatsAggregator } from "./stage-stats-aggregator.ts";

export type TextSink = (text: string) => void;

/** `fennec serve --log-stats`: a fresh aggregator per request, printed when the request is finalized. */
export function onlineTables(numStages: number, write: TextSink, pid: number = process.pid): PipelineStatsSink {
  // nothing is kept here: the pipeline holds each request's aggregator, so an aborted request leaves nothing behind
  return {
    eventsFor: (): RequestStageEvents => {
      const aggregator = new StageStatsAggregator(numStages);
      return {
        markWallStart: (atMs) => aggregator.markWallStart(atMs),
        onStageInput: (stageId, atMs) => aggregator.onStageInput(stageId, atMs),
        onStageOutput: (stageId, atMs) => aggregator.onStageOutput(stageId, atMs),
        finalize: (request: FinalizedRequest) => {
          aggregator.finalize(request);
          write(renderSummary(aggregator.summary(), new Date(), pid));
        },
      };
    },
  };
}

/** `fennec run-batch --log-stats`: one aggregator for the batch; `print()` once every request has completed. */
export class BatchTables implements PipelineStatsSink {
  private readonly aggregator: StageStatsAggregator;

  constructor(numStages: number, private readonly write: TextSink) {
    this.aggregator = new StageStatsAggregator(numStages);
  }

  eventsFor(): RequestStageEvents {
    return this.aggregator;
  }

  print(): void {
    this.write(renderSummary(this.aggregator.summary(), new Date(), null));
  }
}
