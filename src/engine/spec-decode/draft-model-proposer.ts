/**
 * The draft-model proposer (vLLM vllm/v1/spec_decode/draft_model.py, method "draft_model" with
 * draft_sample_method "greedy"): a smaller model with the target's vocabulary runs k greedy steps per request, batched
 * over requests, on its own KV cache that uses the target's block ids (vLLM shares the block table), so the pool
 * accounting covers both (resolveEngineConfig's `extraKvBytesPerBlock`). The draft's probabilities are not used:
 * verification treats the drafts as one-hot, as vLLM does for greedy drafting.
 *
 * Per request the proposer remembers how many positions its cache holds for the request's real tokens; accepted drafts
 * stay valid, rejected ones are recomputed (overwritten) by the next catch-up. Preemption (new blocks) starts over
 * from position 0; so does a request whose blocks came from the prefix cache or a KV handoff (the draft never
 * computed them). Drafts only change speed, never output: verification decides every token.
 */
import type { ModelRunner } from "../../model/model-batch.ts";
import type { ModelConfig } from "../../model/model-config.ts";
import type { RequestState } from "../request.ts";
import type { SpeculativeConfig } from "../../config/speculative-config.ts";
import type { DraftProposer } from "./proposer.ts";
import { err, ok, type Result } from "../../util/result.ts";

interface DraftState {
  /** positions [0, numValid) of the draft cache hold the request's real tokens */
  numValid: number;
  /** numPreemptions when numValid was set: a preemption frees the blocks */
  numPreemptions: number;
  /** numTokens when the last drafts were made and the drafts fed at positions numTokens.. (all but the last) */
  draftedFrom: number;
  fedDrafts: readonly number[];
}

/**
 * vLLM's start-up check that the draft can propose the target's token ids (same vocabulary size), plus the
 * tokenizer's tokens where both files carry them.
 * @example checkDraftVocabulary(target.config, draft.config, targetTokens, draftTokens)
 */
export function checkDraftVocabulary(target: ModelConfig, draft: ModelConfig, targetTokens: readonly string[] | null, draftTokens: readonly string[] | null): Result<void> {
  if (target.vocabSize !== draft.vocabSize) {
    return err(`Target and draft model should have the same vocabulary size. Target model vocab_size=${target.vocabSize}. Draft model vocab_size=${draft.vocabSize}. Using models with different tokenizers can cause out-of-bounds errors during speculative decoding.`);
  }
  if (targetTokens !== null && draftTokens !== null) {
    const at = targetTokens.findIndex((t, i) => t !== draftTokens[i]);
    if (at >= 0 || targetTokens.length !== draftTokens.length) {
      return err(`the draft model's tokenizer differs from the target's (token ${at >= 0 ? at : Math.min(targetTokens.length, draftTokens.length)}: ${JSON.stringify(targetTokens[at] ?? null)} vs ${JSON.stringify(draftTokens[at] ?? null)}); speculative decoding needs a draft with the same tokenizer`);
    }
  }
  return ok(undefined);
}

function argmax(values: Float32Array): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

export class DraftModelProposer implements DraftProposer {
  private readonly states = new Map<RequestState, DraftState>();
  private readonly blockSize: number;

  /**
   * `reserve(req, numPositions)`: makes the request's block table cover that many positions (false: the pool is full;
   * the drafts are cut to what is covered).
   */
  constructor(
    private readonly draft: ModelRunner,
    private readonly config: SpeculativeConfig,
    numBlocks: number,
    blockSize: number,
    private readonly reserve: (req: RequestState, numPositions: number) => boolean,
  ) {
    this.blockSize = blockSize;
    draft.allocateKvCache(numBlocks, blockSize);
  }

  private stateOf(req: RequestState): DraftState {
    let s = this.states.get(req);
    if (s === undefined || s.numPreemptions !== req.numPreemptions) {
      s = { numValid: 0, numPreemptions: req.numPreemptions, draftedFrom: 0, fedDrafts: [] };
      this.states.set(req, s);
    }
    // fed drafts that were accepted are real tokens now: their KV stays valid
    let n = s.numValid;
    if (s.draftedFrom === n) for (let j = 0; j < s.fedDrafts.length && req.allTokenIds[n] === s.fedDrafts[j]; j++) n++;
    s.numValid = Math.min(n, req.numTokens - 1);
    return s;
  }

  async propose(requests: readonly RequestState[], maxModelLen: number): Promise<void> {
    interface Job { req: RequestState; state: DraftState; k: number; drafts: number[] }
    const jobs: Job[] = [];
    for (const req of requests) {
      req.draftTokenIds = [];
      const state = this.stateOf(req);
      let k = Math.min(this.config.numSpeculativeTokens, maxModelLen - req.numTokens - 1);
      if (k <= 0) continue;
      // the drafts fed back need slots up to position numTokens + k - 2; cut k to what the pool can cover
      if (!this.reserve(req, req.numTokens + k - 1)) k = Math.min(k, req.blockIds.length * this.blockSize - req.numTokens + 1);
      if (k <= 0) continue;
      jobs.push({ req, state, k, drafts: [] });
    }
    if (jobs.length === 0) return;
    // pass 0 catches up the real tokens since the last valid position and drafts d1; pass j feeds d_j and drafts d_j+1
    for (let pass = 0; pass < this.config.numSpeculativeTokens; pass++) {
      const active = jobs.filter((j) => j.drafts.length < j.k);
      if (active.length === 0) break;
      const sequences = active.map((j) => {
        const startPos = pass === 0 ? j.state.numValid : j.req.numTokens + pass - 1;
        const tokenIds = pass === 0 ? Int32Array.from(j.req.allTokenIds.slice(startPos)) : Int32Array.of(j.drafts[pass - 1]!);
        return { tokenIds, startPos, blockTable: Int32Array.from(j.req.blockIds), logits: "last" as const };
      });
      const { logits, rowStart } = await this.draft.execute({ sequences });
      const vocabSize = this.draft.config.vocabSize;
      active.forEach((j, i) => {
        const r = rowStart[i]!;
        j.drafts.push(argmax(logits.subarray(r * vocabSize, (r + 1) * vocabSize)));
      });
    }
    for (const j of jobs) {
      j.req.draftTokenIds = j.drafts;
      j.state.numValid = j.req.numTokens;
      j.state.draftedFrom = j.req.numTokens;
      j.state.fedDrafts = j.drafts.slice(0, -1);
    }
  }

  forget(request: RequestState): void {
    this.states.delete(request);
  }

  dispose(): void {
    this.draft.dispose();
  }
}
