/**
 * When the `--log-stats` tables are printed (reference omni-stats-tables.md §1.1): online, one block per request as
 * soon as it is finalized (e2e_requests = 1, with the `(APIServer pid=N) ` prefix); offline, one block for the whole
 * batch once it has completed (e2e_requests = batch size).
 * @example const sink = onlineTables(2, (t) => process.stdout.write(t)); buildPipeline(chain, factory, { tables: sink });
 */
import { StageStatsAggregator, type PipelineStatsSink } from "../pipeline/stage-stats.ts";
import { renderSummary } from "./omni-tables.ts";

export type TextSink = (text: string) => void;

/** `fennec serve --log-stats`: a fresh aggregator per request, printed when the request is finalized. */
export function onlineTables(numStages: number, write: TextSink, pid: number = process.pid): PipelineStatsSink {
  // nothing is kept here: the pipeline holds each request's aggregator, so an aborted request leaves nothing behind
  return {
    aggregatorFor: () => new StageStatsAggregator(numStages),
    finalized: (_requestId, aggregator) => write(renderSummary(aggregator.summary(), new Date(), pid)),
  };
}

/** `fennec run-batch --log-stats`: one aggregator for the batch; `print()` once every request has completed. */
export class BatchTables implements PipelineStatsSink {
  private readonly aggregator: StageStatsAggregator;

  constructor(numStages: number, private readonly write: TextSink) {
    this.aggregator = new StageStatsAggregator(numStages);
  }

  aggregatorFor(): StageStatsAggregator {
    return this.aggregator;
  }

  finalized(): void {}

  print(): void {
    this.write(renderSummary(this.aggregator.summary(), new Date(), null));
  }
}
