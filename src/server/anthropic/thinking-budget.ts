/**
 * thinking.budget_tokens enforced (what vLLM's thinking_token_budget does inside its engine, and llama.cpp's
 * reasoning budget in common/chat.cpp, done here from the outside): the request first runs with the budget as its
 * output limit; when that is spent while the model is still reasoning, the reasoning parser's end token is appended,
 * and the answer continues in a second engine request whose prompt is the first one's prompt + output + end token,
 * for what is left of max_tokens (the prefix cache makes the second prefill short). The client sees one message. The
 * engine sees (and /metrics counts) two requests in that case: the price of not forcing tokens inside the engine.
 * @example const outputs = budgetedOutputs(options, prepared, abort) ?? generateOutputs(orchestrator, request, abort);
 */
import type { CompletionOutput, RequestOutput } from "../../frontend/orchestrator.ts";
import { generateOutputs, type RequestAbort } from "../generation/run-generation.ts";
import type { ServerOptions } from "../server-options.ts";
import type { PreparedMessage } from "./prepare.ts";

const pending = (o: CompletionOutput): CompletionOutput => ({ ...o, finishReason: null, stopReason: null });

/** The outputs of a budgeted request, or null when it has no budget (then the plain generation runs). */
export function budgetedOutputs(options: ServerOptions, prepared: PreparedMessage, abort: RequestAbort): AsyncIterable<RequestOutput> | null {
  const budget = prepared.thinkingBudgetTokens;
  const endToken = prepared.reasoningEndToken;
  const { request } = prepared;
  const total = request.sampling.maxTokens;
  if (budget === null || endToken === null || total === null || budget >= total) return null;
  const { orchestrator } = options;
  return (async function* () {
    const generatedIds: number[] = [];
    let text = "";
    let spent: RequestOutput | null = null;
    for await (const output of generateOutputs(orchestrator, { ...request, sampling: { ...request.sampling, maxTokens: budget } }, abort)) {
      const o = output.outputs.find((c) => c.index === 0);
      if (o !== undefined) {
        text += o.textDelta;
        generatedIds.push(...o.tokenIdsDelta);
      }
      if (o?.finishReason !== "length") {
        yield output;
        continue;
      }
      // the budget is spent, not the answer: this output is not the last
      spent = output;
      yield { ...output, finished: false, outputs: output.outputs.map(pending) };
    }
    if (spent === null) return;
    // still reasoning: close it, as the model would have
    const endIds = text.includes(endToken) ? [] : orchestrator.tokenizer.encode(endToken, { addSpecial: false, parseSpecial: true });
    const offset = generatedIds.length + endIds.length;
    if (endIds.length > 0) {
      yield { ...spent, finished: false, outputs: [{ index: 0, textDelta: endToken, tokenIdsDelta: endIds, numGeneratedTokens: offset, finishReason: null, stopReason: null }] };
    }
    const answer = { ...request, requestId: `${request.requestId}-answer`, promptTokenIds: [...request.promptTokenIds, ...generatedIds, ...endIds], sampling: { ...request.sampling, maxTokens: total - offset } };
    if (answer.sampling.maxTokens < 1) {
      yield { ...spent, finished: true, outputs: [{ index: 0, textDelta: "", tokenIdsDelta: [], numGeneratedTokens: offset, finishReason: "length", stopReason: null }] };
      return;
    }
    for await (const output of generateOutputs(orchestrator, answer, abort)) {
      // the client's prompt and output counts, not the continuation's
      yield {
        ...output, numPromptTokens: spent.numPromptTokens, numCachedTokens: spent.numCachedTokens,
        outputs: output.outputs.map((o) => ({ ...o, numGeneratedTokens: o.numGeneratedTokens + offset })),
      };
    }
  })();
}
