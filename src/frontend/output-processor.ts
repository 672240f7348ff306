/**
 * Main-thread output processing for one sequence (vLLM OutputProcessor + IncrementalDetokenizer): turns the engine's
 * new token ids into text deltas, finds stop strings (then the caller aborts the engine request: the only upward
 * message), and holds back text that could still become a stop string so a stream never shows part of one.
 */
import type { IncrementalDetokenizer, Tokenizer } from "../tokenizer/tokenizer.ts";
import type { CompletionOutput } from "./orchestrator.ts";
import type { RequestDelta } from "../engine/protocol.ts";
import type { SamplingParams } from "../engine/sampling-params.ts";
import type { FinishReason } from "../engine/stats.ts";

export interface ProcessedDelta {
  readonly output: CompletionOutput;
  /** a stop string ended the sequence while the engine still runs it: send abort */
  readonly abortEngine: boolean;
}

export class SequenceOutputProcessor {
  private readonly detokenizer: IncrementalDetokenizer;
  /** all text so far (after stop-string truncation) */
  private text = "";
  /** characters of `text` already sent */
  private numSentChars = 0;
  private numGenerated = 0;
  private finishReason: FinishReason | null = null;
  /** characters that could be the start of a stop string and are held back until more text arrives */
  private readonly holdBackChars: number;

  constructor(tokenizer: Tokenizer, private readonly index: number, private readonly params: SamplingParams) {
    this.detokenizer = tokenizer.createDetokenizer({ skipSpecialTokens: params.skipSpecialTokens });
    const longestStop = params.stop.reduce((m, s) => Math.max(m, s.length), 0);
    this.holdBackChars = params.includeStopStrInOutput || longestStop === 0 ? 0 : longestStop - 1;
  }

  get finished(): boolean {
    return this.finishReason !== null;
  }

  get numGeneratedTokens(): number {
    return this.numGenerated;
  }

  finishReasonOr(fallback: FinishReason): FinishReason {
    return this.finishReason ?? fallback;
  }

  get fullText(): string {
    return this.text;
  }

  process(delta: RequestDelta): ProcessedDelta {
    this.numGenerated += delta.newTokenIds.length;
    const searchFrom = Math.max(0, this.text.length - this.longestStopLength() + 1);
    // vLLM's detokenizer (v1/engine/detokenizer.py update): a stop token (EOS or stop_token_ids) ends the text without
    // its own text, unless include_stop_str_in_output
    const stopTerminated = delta.finishReason === "stop" && !this.params.includeStopStrInOutput;
    this.text += this.detokenizer.push(stopTerminated ? delta.newTokenIds.slice(0, -1) : delta.newTokenIds);
    if (delta.finishReason) this.text += this.detokenizer.flush();
    let finishReason: FinishReason | null = delta.finishReason ?? null;
    let stopReason: string | number | null = delta.stopReason ?? null;
    let abortEngine = false;
    const stop = this.findStop(searchFrom);
    if (stop) {
      this.text = this.text.slice(0, this.params.includeStopStrInOutput ? stop.at + stop.str.length : stop.at);
      abortEngine = !delta.finishReason;
      finishReason = "stop";
      stopReason = stop.str;
    }
    this.finishReason = finishReason;
    const sendUpTo = finishReason ? this.text.length : Math.max(this.numSentChars, this.text.length - this.holdBackChars);
    const textDelta = this.text.slice(this.numSentChars, sendUpTo);
    this.numSentChars = sendUpTo;
    return {
      output: {
        index: this.index, textDelta, tokenIdsDelta: delta.newTokenIds, ...(delta.logprobs ? { logprobsDelta: delta.logprobs } : {}),
        numGeneratedTokens: this.numGenerated, finishReason, stopReason,
      },
      abortEngine,
    };
  }

  /** Ends the sequence without engine output (client abort, engine error). */
  finish(reason: FinishReason): CompletionOutput {
    this.finishReason = reason;
    const textDelta = this.text.slice(this.numSentChars);
    this.numSentChars = this.text.length;
    return { index: this.index, textDelta, tokenIdsDelta: [], numGeneratedTokens: this.numGenerated, finishReason: reason, stopReason: null };
  }

  private longestStopLength(): number {
    return this.params.stop.reduce((m, s) => Math.max(m, s.length), 0);
  }

  /** the earliest stop string that ends in the new text */
  private findStop(searchFrom: number): { at: number; str: string } | null {
    let best: { at: number; str: string } | null = null;
    for (const str of this.params.stop) {
      const at = this.text.indexOf(str, searchFrom);
      if (at >= 0 && (best === null || at < best.at)) best = { at, str };
    }
    return best;
  }
}
