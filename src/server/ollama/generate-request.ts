/**
 * POST /api/generate's body (ollama api/types.go GenerateRequest) in vLLM's names. Without `raw` the prompt (and
 * `system`) go through the model's chat template as a system and a user message, as Ollama's template does with
 * .System and .Prompt; with `raw` the prompt is sent as it is (a completion). Refused, each with its reason:
 * `template` (a Go template: fennec renders the model's Jinja template, or --chat-template), `context` (the deprecated
 * token list: send the conversation to /api/chat), and images with `raw` or `suffix` (only the chat template places
 * them); `images` go with the prompt as image parts before its text (image-parts.ts). `suffix` asks for fill-in-the-middle, which Ollama
 * allows where the model's template has a suffix slot; fennec allows it where the GGUF names FIM tokens
 * (tokenizer.ggml.fim_pre/suf/mid_token_id) and builds llama.cpp's prompt (tools/server format_infill: prefix first),
 * else Ollama's "does not support insert".
 * Framework-free; throws ApiError (400).
 * @example const prepared = generateRequest(body);
 */
import { ApiError } from "../errors.ts";
import type { ChatMessageBody } from "../openai/schemas.ts";
import { optionalString, type Body } from "./request-fields.ts";
import { ollamaImageParts } from "./image-parts.ts";

export type GenerateInput =
  /** the prompt goes through the chat template as these messages */
  | { readonly kind: "chat"; readonly messages: ChatMessageBody[] }
  /** the prompt is the text itself */
  | { readonly kind: "raw"; readonly text: string }
  /** fill-in-the-middle: the model writes what goes between prefix and suffix (fimPrompt) */
  | { readonly kind: "infill"; readonly prefix: string; readonly suffix: string }
  /** nothing to generate: Ollama's "load the model" request */
  | { readonly kind: "load" };

/** The model's fill-in-the-middle token ids (GGUF tokenizer.ggml.fim_*_token_id), or null when it has none. */
export interface FimTokens {
  readonly pre: number;
  readonly suf: number;
  readonly mid: number;
}

/** FIM ids from the GGUF metadata (ollama-serving.ts), null unless all three are there. */
export function fimTokens(metadata: ReadonlyMap<string, unknown> | undefined): FimTokens | null {
  const id = (name: string) => metadata?.get(`tokenizer.ggml.fim_${name}_token_id`);
  const [pre, suf, mid] = [id("pre"), id("suf"), id("mid")];
  return typeof pre === "number" && typeof suf === "number" && typeof mid === "number" ? { pre, suf, mid } : null;
}

/**
 * llama.cpp's infill prompt (tools/server/utils.hpp format_infill, prefix-suffix-middle order): the tokenizer's
 * leading special tokens (BOS where it adds one), FIM_PRE, the prefix, FIM_SUF, the suffix, FIM_MID.
 */
export function fimPrompt(fim: FimTokens, encode: (text: string, addSpecial: boolean) => number[], prefix: string, suffix: string): number[] {
  return [...encode("", true), fim.pre, ...encode(prefix, false), fim.suf, ...encode(suffix, false), fim.mid];
}

export function generateInput(body: Body, model: string, fim: FimTokens | null = null): GenerateInput {
  const prompt = optionalString(body, "prompt") ?? "";
  const system = optionalString(body, "system");
  const template = optionalString(body, "template");
  const context = body["context"];
  const hasContext = Array.isArray(context) && context.length > 0;
  if (context !== undefined && context !== null && !Array.isArray(context)) throw new ApiError("badRequest", "context must be a list of token ids");
  const raw = body["raw"];
  if (raw !== undefined && raw !== null && typeof raw !== "boolean") throw new ApiError("badRequest", "raw must be a boolean");
  if (raw === true && ((template ?? "") !== "" || (system ?? "") !== "" || hasContext)) {
    throw new ApiError("badRequest", "raw mode does not support template, system, or context");
  }
  const images = ollamaImageParts(body["images"], "images");
  if (images.length > 0 && (raw === true || (optionalString(body, "suffix") ?? "") !== "")) {
    throw new ApiError("badRequest", "images need the chat template to place them: they do not go with raw or suffix prompts", "images");
  }
  const suffix = optionalString(body, "suffix") ?? "";
  if (suffix !== "") {
    if (fim === null) throw new ApiError("badRequest", `"${model}" does not support insert (its GGUF names no fill-in-the-middle tokens)`);
    if (raw === true || (system ?? "") !== "") throw new ApiError("badRequest", "suffix (fill-in-the-middle) does not take raw or system: the prompt is built from prompt and suffix alone");
  }
  if ((template ?? "") !== "") throw new ApiError("badRequest", "template is not supported by fennec: it renders the model's Jinja chat template (or --chat-template), not Go templates; leave template out");
  if (hasContext) throw new ApiError("badRequest", "context (the deprecated token list of an earlier answer) is not supported by fennec: send the whole conversation to /api/chat instead");
  if (suffix !== "") return { kind: "infill", prefix: prompt, suffix };
  if (prompt === "" && images.length === 0) return { kind: "load" };
  if (raw === true) return { kind: "raw", text: prompt };
  const content = images.length === 0 ? prompt : [...images, { type: "text", text: prompt }];
  return { kind: "chat", messages: [...(system !== undefined && system !== "" ? [{ role: "system", content: system }] : []), { role: "user", content }] };
}
