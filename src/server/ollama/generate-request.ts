/**
 * POST /api/generate's body (ollama api/types.go GenerateRequest) in vLLM's names. Without `raw` the prompt (and
 * `system`) go through the model's chat template as a system and a user message, as Ollama's template does with
 * .System and .Prompt; with `raw` the prompt is sent as it is (a completion). Refused, each with its reason:
 * `template` (a Go template: fennec renders the model's Jinja template, or --chat-template), `suffix` (fill-in-the-
 * middle needs a template with a suffix slot, which fennec's chat templates do not have: Ollama's own answer for such
 * a model), `context` (the deprecated token list: send the conversation to /api/chat), and images.
 * Framework-free; throws ApiError (400).
 * @example const prepared = generateRequest(body);
 */
import { ApiError } from "../errors.ts";
import type { ChatMessageBody } from "../openai/schemas.ts";
import { optionalString, refuseImages, type Body } from "./request-fields.ts";

export type GenerateInput =
  /** the prompt goes through the chat template as these messages */
  | { readonly kind: "chat"; readonly messages: ChatMessageBody[] }
  /** the prompt is the text itself */
  | { readonly kind: "raw"; readonly text: string }
  /** nothing to generate: Ollama's "load the model" request */
  | { readonly kind: "load" };

export function generateInput(body: Body, model: string): GenerateInput {
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
  refuseImages(body["images"], "images");
  if ((optionalString(body, "suffix") ?? "") !== "") throw new ApiError("badRequest", `"${model}" does not support insert (fennec's chat templates have no suffix slot for fill-in-the-middle)`);
  if ((template ?? "") !== "") throw new ApiError("badRequest", "template is not supported by fennec: it renders the model's Jinja chat template (or --chat-template), not Go templates; leave template out");
  if (hasContext) throw new ApiError("badRequest", "context (the deprecated token list of an earlier answer) is not supported by fennec: send the whole conversation to /api/chat instead");
  if (prompt === "") return { kind: "load" };
  if (raw === true) return { kind: "raw", text: prompt };
  return { kind: "chat", messages: [...(system !== undefined && system !== "" ? [{ role: "system", content: system }] : []), { role: "user", content: prompt }] };
}
