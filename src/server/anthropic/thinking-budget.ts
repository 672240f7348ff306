/**
 * thinking.budget_tokens enforced as vLLM enforces thinking_token_budget (its ThinkingTokenBudgetLogitsProcessor) and
 * llama.cpp its reasoning budget (common/chat.cpp): the request carries the budget and the reasoning parser's end
 * token ids to the engine (engine/thinking-budget.ts), whose sampler forces the end once the output holds
 * budget_tokens tokens and no end. One engine request: the client's message, /metrics and the access log count it once.
 * @example const request = withThinkingBudget(options, prepared);
 */
import type { GenerateRequest } from "../../frontend/orchestrator.ts";
import type { ServerOptions } from "../server-options.ts";
import type { PreparedMessage } from "./prepare.ts";

/** The request with its budget, or as it was when it has none (or the budget cannot bind before max_tokens). */
export function withThinkingBudget(options: ServerOptions, prepared: PreparedMessage): GenerateRequest {
  const { request, thinkingBudgetTokens: budget, reasoningEndToken: endToken } = prepared;
  const total = request.sampling.maxTokens;
  if (budget === null || endToken === null || total === null || budget >= total) return request;
  const endTokenIds = options.orchestrator.tokenizer.encode(endToken, { addSpecial: false, parseSpecial: true });
  return { ...request, sampling: { ...request.sampling, thinkingBudget: { budgetTokens: budget, endTokenIds } } };
}
