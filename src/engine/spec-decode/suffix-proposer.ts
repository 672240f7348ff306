/**
 * vLLM's suffix decoding proposer (vllm/v1/spec_decode/suffix_decoding.py SuffixDecodingProposer over Arctic
 * Inference's SuffixDecodingCache, arctic_inference/suffix_decoding/cache.py), model-free: a suffix tree per active
 * request over its prompt and output, and one global tree over the outputs of the last
 * `suffix_decoding_max_cached_requests` requests (FIFO; 0 turns it off), so a request that repeats an earlier answer
 * drafts from it. Each step the pattern is the last `suffix_decoding_max_tree_depth` tokens; the request's own tree
 * drafts first and the global tree's draft replaces it when it scores higher. At most
 * min(k, max_model_len - num_tokens - 1) tokens; the draft length varies per step.
 */
import type { RequestState } from "../request.ts";
import type { SpeculativeConfig, SuffixDecodingConfig } from "../../config/speculative-config.ts";
import type { DraftProposer } from "./proposer.ts";
import { SuffixTree, type SuffixSpeculation } from "./suffix-tree.ts";

interface ActiveRequest {
  /** prompt then output, as one sequence (id 0) */
  readonly local: SuffixTree;
  /** tokens of allTokenIds the trees have */
  numSynced: number;
  /** this request's response in the global tree */
  readonly globalSeq: number;
}

export class SuffixDecodingProposer implements DraftProposer {
  private readonly suffix: SuffixDecodingConfig;
  private readonly global: SuffixTree;
  private readonly active = new Map<RequestState, ActiveRequest>();
  /** global tree sequence ids, oldest first (vLLM's FIFO eviction; a Set keeps insertion order) */
  private readonly cached = new Set<number>();
  private nextSeq = 0;

  constructor(private readonly config: SpeculativeConfig) {
    this.suffix = config.suffix!;
    this.global = new SuffixTree(this.suffix.maxTreeDepth);
  }

  /** requests whose responses the global tree holds (tests, logs) */
  get numCachedRequests(): number { return this.cached.size; }

  propose(requests: readonly RequestState[], maxModelLen: number): void {
    const depth = this.suffix.maxTreeDepth;
    for (const req of requests) {
      const state = this.sync(req);
      const numTokens = req.numTokens;
      const maxSpecTokens = Math.min(this.config.numSpeculativeTokens, maxModelLen - numTokens - 1);
      if (maxSpecTokens <= 0) { req.draftTokenIds = []; continue; }
      const pattern = req.allTokenIds.slice(Math.max(0, numTokens - depth), numTokens);
      const spec: SuffixSpeculation = { maxSpecTokens, maxSpecFactor: this.suffix.maxSpecFactor, minTokenProb: this.suffix.minTokenProb };
      let draft = state.local.speculate(pattern, spec);
      if (this.cached.size > 0) {
        const other = this.global.speculate(pattern, spec);
        if (other.score > draft.score) draft = other;
      }
      req.draftTokenIds = draft.tokenIds;
    }
  }

  /** The request's trees brought up to its tokens (vLLM start_request on its first step, then add_active_response). */
  private sync(req: RequestState): ActiveRequest {
    let state = this.active.get(req);
    if (!state) {
      state = { local: new SuffixTree(this.suffix.maxTreeDepth), numSynced: 0, globalSeq: this.nextSeq++ };
      this.active.set(req, state);
      if (this.suffix.maxCachedRequests > 0) {
        this.cached.add(state.globalSeq);
        while (this.cached.size > this.suffix.maxCachedRequests) {
          const oldest = this.cached.values().next().value as number;
          this.cached.delete(oldest);
          this.global.remove(oldest);
        }
      }
    }
    const all = req.allTokenIds;
    for (let i = state.numSynced; i < all.length; i++) {
      state.local.append(0, all[i]!);
      // the response joins the global tree while its slot is cached (it may be evicted before the request ends)
      if (i >= req.numPromptTokens && this.cached.has(state.globalSeq)) this.global.append(state.globalSeq, all[i]!);
    }
    state.numSynced = all.length;
    return state;
  }

  /** vLLM stop_request: the prompt tree goes; the response stays in the global tree until evicted. */
  forget(request: RequestState): void {
    this.active.delete(request);
  }
}
