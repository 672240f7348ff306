/**
 * The drafter seam (vLLM's proposers in vllm/v1/spec_decode/): after a step's sampling, each request that got a new
 * token and goes on is handed to the proposer, which sets its `draftTokenIds` for the next step. The ngram proposer
 * runs here; the draft-model proposer (draft-model-proposer.ts) runs a second, smaller model.
 */
import type { RequestState } from "../request.ts";
import type { SpeculativeConfig } from "../../config/speculative-config.ts";
import { proposeNgram } from "./ngram-proposer.ts";

export interface DraftProposer {
  /** sets `draftTokenIds` on each request (empty when nothing is drafted); `maxModelLen` caps the drafts */
  propose(requests: readonly RequestState[], maxModelLen: number): Promise<void> | void;
  /** a request left the engine or lost its KV blocks (finish, abort, preemption) */
  forget?(request: RequestState): void;
  dispose?(): void;
}

/** vLLM NgramProposer over each request's own prompt + output tokens. */
export class NgramDraftProposer implements DraftProposer {
  constructor(private readonly config: SpeculativeConfig) {}

  propose(requests: readonly RequestState[], maxModelLen: number): void {
    const { numSpeculativeTokens, promptLookupMin, promptLookupMax } = this.config;
    for (const req of requests) {
      const k = Math.min(numSpeculativeTokens, maxModelLen - req.numTokens);
      req.draftTokenIds = k > 0 ? proposeNgram(req.allTokenIds, promptLookupMin, promptLookupMax, k) : [];
    }
  }
}
