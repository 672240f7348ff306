/**
 * The sampling fields that need the tokenizer or xgrammar before a request goes to the engine: the structured-output
 * grammar (checked, 400 naming the field), `allowed_token_ids`, and `bad_words` tokenized as vLLM does
 * (vllm/sampling_params.py update_from_tokenizer: each word without and with a leading space).
 */
import { compileBannedText, type SamplingParams } from "../../engine/sampling-params.ts";
import type { GrammarChecker } from "../../grammar/grammar-checker.ts";
import type { StructuredOutputsSettings } from "../../config/structured-outputs-config.ts";
import type { Tokenizer } from "../../tokenizer/tokenizer.ts";
import { ApiError } from "../errors.ts";
import type { ServerOptions } from "../server-options.ts";
import { checkRequestGrammar, requestGrammar, type StructuredOutputsBody } from "./structured-outputs.ts";

export interface SamplingExtrasBody extends StructuredOutputsBody {
  readonly allowed_token_ids?: readonly number[] | null;
  readonly bad_words?: readonly string[] | null;
}

export interface SamplingExtrasContext {
  readonly tokenizer: Tokenizer;
  readonly checker: GrammarChecker;
  readonly structuredOutputs: StructuredOutputsSettings;
}

/** The context from the app's options (createApp always sets a checker). */
export function extrasContext(options: ServerOptions): SamplingExtrasContext {
  if (!options.grammarChecker) throw new Error("ServerOptions.grammarChecker is set by createApp");
  return { tokenizer: options.orchestrator.tokenizer, checker: options.grammarChecker, structuredOutputs: options.structuredOutputs ?? { disableAnyWhitespace: false } };
}

export type SamplingExtras = Pick<SamplingParams, "structuredOutputs" | "allowedTokenIds" | "badWordsTokenIds" | "badWordsTexts">;

/** vLLM's bad-word token sequences: the word as written, and with one leading space when that spells it differently. */
export function badWordsTokenIds(tokenizer: Tokenizer, words: readonly string[]): number[][] {
  const out: number[][] = [];
  for (const word of words) {
    if (word.trim() === "") throw new ApiError("badRequest", "bad_words cannot contain an empty string.", "bad_words");
    const plain = tokenizer.encode(word.trimStart(), { addSpecial: false, parseSpecial: false });
    out.push(plain);
    const spaced = tokenizer.encode(` ${word.trimStart()}`, { addSpecial: false, parseSpecial: false });
    if (spaced.length > 0 && spaced[0] !== plain[0] && spaced.length === plain.length) out.push(spaced);
  }
  return out;
}

export async function samplingExtras(body: SamplingExtrasBody, ctx: SamplingExtrasContext): Promise<SamplingExtras> {
  const grammar = requestGrammar(body, ctx.structuredOutputs);
  if (grammar) {
    if (!ctx.tokenizer.grammarVocabulary) throw new ApiError("badRequest", "Structured outputs requires a tokenizer vocabulary, which this model's tokenizer does not expose.", grammar.param);
    await checkRequestGrammar(ctx.checker, grammar);
  }
  const badWords = body.bad_words ? badWordsTokenIds(ctx.tokenizer, body.bad_words) : [];
  // the texts those sequences spell, banned however the model splits them into tokens (engine/sampler.ts)
  const texts = new Set(badWords.map((ids) => ids.map((id) => (ctx.tokenizer.isSpecial(id) ? "" : ctx.tokenizer.tokenText(id))).join("")));
  return {
    structuredOutputs: grammar?.spec ?? null,
    allowedTokenIds: body.allowed_token_ids ?? null,
    badWordsTokenIds: badWords,
    badWordsTexts: [...texts].filter((t) => t !== "").map((t) => compileBannedText(t, { vocabSize: ctx.tokenizer.vocabSize, tokenText: (id) => (ctx.tokenizer.isSpecial(id) ? "" : ctx.tokenizer.tokenText(id)) })),
  };
}
