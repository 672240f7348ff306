/**
 * n > 1 (vllm/v1/engine/parallel_sampling.py: ParentRequest): a request with n choices runs as n child sequences of
 * one choice each, `${index}_${requestId}`, with seeds seed + index; the children share the prompt's KV blocks
 * through the prefix cache. The parent's figures (n, the longest child) are counted here as children finish and
 * handed on with the record of the child that finishes the parent, so no one downstream rebuilds parents from ids.
 * @example const ids = childRequestIds("cmpl-1", 2); // ["0_cmpl-1", "1_cmpl-1"]
 */
import type { SamplingParams } from "../engine/sampling-params.ts";
import type { ParentRequestStats } from "./iteration-stats.ts";

/** The engine ids of a request's children: the request's own id when n = 1. */
export function childRequestIds(requestId: string, n: number): string[] {
  return Array.from({ length: n }, (_, index) => (n === 1 ? requestId : `${index}_${requestId}`));
}

/** child i of an n > 1 request: one sequence, its own seed (seed + i, as vLLM's ParentRequest) */
export function childSampling(sampling: SamplingParams, index: number): SamplingParams {
  if (sampling.n === 1) return sampling;
  return { ...sampling, n: 1, seed: sampling.seed === null ? null : sampling.seed + index };
}

/** Counts a parent's finished children; reports the parent once, when its last child finishes. */
export class ParentRequestCounter {
  private numFinished = 0;
  private maxNumGenerationTokens = 0;
  /** a child the client abandoned: the parent is never reported (vLLM counts no aborted request) */
  private abandoned = false;

  constructor(private readonly n: number) {}

  /** One child finished; returns the parent's figures when it was the last one, else null. */
  childFinished(numGenerationTokens: number, clientAborted: boolean): ParentRequestStats | null {
    if (this.n <= 1) return null;
    this.numFinished++;
    if (clientAborted) this.abandoned = true;
    this.maxNumGenerationTokens = Math.max(this.maxNumGenerationTokens, numGenerationTokens);
    if (this.numFinished < this.n || this.abandoned) return null;
    return { n: this.n, maxNumGenerationTokens: this.maxNumGenerationTokens };
  }
}
