/**
 * The alias rows of the request-field table (request-fields.ts): llama.cpp's and Ollama's names for fields vLLM
 * already has, read as the vLLM field before anything else looks at the body, so one code path serves every spelling.
 * Both set to different values is a 400 naming the alias (a silent winner would surprise one of the two clients).
 * Framework-free; throws ApiError (400) naming the field.
 * @example resolveAliases({ prompt: "hi", n_predict: 8 }, "completions") // { prompt: "hi", max_tokens: 8 }
 */
import { ApiError, invalidParam } from "../errors.ts";
import type { Endpoint } from "./request-fields.ts";

type Body = Readonly<Record<string, unknown>>;

const given = (v: unknown): boolean => v !== undefined && v !== null;

/** INT32_MAX: llama.cpp reads n_predict into an int32 */
const N_PREDICT_MAX = 2147483647;

/** `alias` read as `target`: a 400 when the body sets both to different values. */
function setOnce(out: Record<string, unknown>, alias: string, target: string, value: unknown): void {
  if (given(out[target]) && out[target] !== value) {
    throw invalidParam(alias, `${alias} (${JSON.stringify(value)}) disagrees with ${target} (${JSON.stringify(out[target])}); send one of them.`, value);
  }
  out[target] = value;
}

/** llama.cpp's n_predict (server-schema.cpp): -1 = no limit (up to the context), 0 = prompt only (not served here). */
function nPredict(out: Record<string, unknown>, value: unknown): void {
  if (typeof value !== "number" || !Number.isInteger(value) || value < -1 || value > N_PREDICT_MAX) {
    throw invalidParam("n_predict", `n_predict must be an integer in [-1, ${N_PREDICT_MAX}], got ${JSON.stringify(value)}.`, value);
  }
  if (value === 0) throw invalidParam("n_predict", "n_predict 0 (evaluate the prompt only) is not supported; use /tokenize, or max_tokens of at least 1.", value);
  // -1: no limit, as an absent max_tokens on chat; completions' default of 16 would be a limit, so it cannot stay absent
  if (value === -1) {
    if (given(out["max_tokens"]) || given(out["max_completion_tokens"])) throw invalidParam("n_predict", "n_predict -1 (no limit) disagrees with max_tokens; send one of them.", value);
    return;
  }
  setOnce(out, "n_predict", given(out["max_completion_tokens"]) ? "max_completion_tokens" : "max_tokens", value);
}

/** Whether the client's body asks for no output limit (n_predict -1): completions then use the context, not their default 16. */
export function noOutputLimit(body: object): boolean {
  return (body as Body)["n_predict"] === -1;
}

/** llama.cpp's n_probs is its logprobs (server-schema.cpp add_alias): chat top_logprobs with logprobs on; completions logprobs. */
function nProbs(out: Record<string, unknown>, value: unknown, endpoint: Endpoint): void {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw invalidParam("n_probs", `n_probs must be a non-negative integer, got ${JSON.stringify(value)}.`, value);
  if (value === 0) return;
  if (endpoint === "completions") return setOnce(out, "n_probs", "logprobs", value);
  if (out["logprobs"] === false) throw invalidParam("n_probs", "n_probs disagrees with logprobs false; send one of them.", value);
  out["logprobs"] = true;
  setOnce(out, "n_probs", "top_logprobs", value);
}

/** Ollama's think: true / false is enable_thinking; its "high" / "medium" / "low" levels are reasoning_effort. */
function think(out: Record<string, unknown>, value: unknown): void {
  if (typeof value === "string") {
    if (!["high", "medium", "low"].includes(value)) throw invalidParam("think", `think must be true, false, "high", "medium" or "low", got ${JSON.stringify(value)}.`, value);
    return setOnce(out, "think", "reasoning_effort", value);
  }
  if (typeof value !== "boolean") throw invalidParam("think", `think must be true, false, "high", "medium" or "low", got ${JSON.stringify(value)}.`, value);
  const kwargs = { ...(out["chat_template_kwargs"] as Record<string, unknown> | null | undefined ?? {}) };
  if (given(kwargs["enable_thinking"]) && kwargs["enable_thinking"] !== value) {
    throw invalidParam("think", `think (${value}) disagrees with chat_template_kwargs.enable_thinking (${JSON.stringify(kwargs["enable_thinking"])}); send one of them.`, value);
  }
  kwargs["enable_thinking"] = value;
  out["chat_template_kwargs"] = kwargs;
}

/** Ollama's (and OpenAI Responses') reasoning: {effort}: reasoning_effort, "none" included. */
function reasoning(out: Record<string, unknown>, value: unknown): void {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalidParam("reasoning", "reasoning must be an object like {\"effort\": \"low\"}.", value);
  const { effort, ...rest } = value as Record<string, unknown>;
  const others = Object.keys(rest);
  if (others.length > 0) throw new ApiError("badRequest", `reasoning.${others[0]} is not supported; only reasoning.effort is read (as reasoning_effort).`, "reasoning");
  if (given(effort)) setOnce(out, "reasoning", "reasoning_effort", effort);
}

/**
 * The body with every alias read as its vLLM field (the alias keys removed). Only the aliases of `endpoint` are read;
 * the others are in no row of that endpoint and are logged as ignored.
 */
export function resolveAliases<T extends object>(body: T, endpoint: Endpoint): T {
  const src = body as Body;
  if (!["n_predict", "n_probs", "n_cmpl", "think", "reasoning"].some((k) => src[k] !== undefined)) return body;
  const out: Record<string, unknown> = { ...src };
  const take = (k: string): unknown => {
    const v = out[k];
    delete out[k];
    return v;
  };
  const predict = take("n_predict");
  if (given(predict)) nPredict(out, predict);
  const probs = take("n_probs");
  if (given(probs)) nProbs(out, probs, endpoint);
  const cmpl = take("n_cmpl");
  if (given(cmpl)) setOnce(out, "n_cmpl", "n", cmpl);
  if (endpoint === "chat") {
    const t = take("think");
    if (given(t)) think(out, t);
    const r = take("reasoning");
    if (given(r)) reasoning(out, r);
  }
  return out as T;
}
