/**
 * POST /api/chat's body (ollama api/types.go ChatRequest, Message, Tool) in vLLM's names: messages (roles lower-cased,
 * `thinking` as the reasoning of earlier turns, tool calls with object arguments, `tool_name` as the tool message's
 * name), tools (the same JSON-schema form as OpenAI's; auto tool choice with the server's tool parser), then the
 * fields every Ollama generation shares (generation-sampling.ts). `images` become image parts before the text
 * (image-parts.ts).
 * Framework-free; throws ApiError (400).
 * @example const body = chatGenerationBody(options, "qwen3:latest", request, fields);
 */
import { ApiError } from "../errors.ts";
import type { ServerOptions } from "../server-options.ts";
import type { ChatGenerationBody } from "../generation/prepare-generation.ts";
import type { ChatMessageBody, ToolDefinitionBody } from "../openai/schemas.ts";
import type { Body, CommonFields } from "./request-fields.ts";
import { ollamaImageParts } from "./image-parts.ts";
import { vllmFields } from "./generation-sampling.ts";

function message(raw: unknown, i: number): ChatMessageBody {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new ApiError("badRequest", `messages[${i}] must be an object`);
  const m = raw as Record<string, unknown>;
  if (typeof m["role"] !== "string") throw new ApiError("badRequest", `messages[${i}].role must be a string`);
  if (m["content"] !== undefined && m["content"] !== null && typeof m["content"] !== "string") throw new ApiError("badRequest", `messages[${i}].content must be a string`);
  const images = ollamaImageParts(m["images"], `messages[${i}].images`);
  const toolCalls = m["tool_calls"];
  if (toolCalls !== undefined && toolCalls !== null && !Array.isArray(toolCalls)) throw new ApiError("badRequest", `messages[${i}].tool_calls must be a list`);
  return {
    role: m["role"].toLowerCase(),
    content: images.length === 0 ? ((m["content"] as string | undefined) ?? "") : [...images, { type: "text", text: (m["content"] as string | undefined) ?? "" }],
    ...(typeof m["thinking"] === "string" && m["thinking"] !== "" ? { reasoning: m["thinking"] } : {}),
    ...(typeof m["tool_name"] === "string" ? { name: m["tool_name"] } : {}),
    ...(typeof m["tool_call_id"] === "string" ? { tool_call_id: m["tool_call_id"] } : {}),
    ...(Array.isArray(toolCalls) && toolCalls.length > 0 ? {
      tool_calls: toolCalls.map((c: unknown, k) => {
        const fn = (c as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
        if (typeof fn?.name !== "string") throw new ApiError("badRequest", `messages[${i}].tool_calls[${k}].function.name must be a string`);
        const id = (c as { id?: unknown }).id;
        return { ...(typeof id === "string" ? { id } : {}), type: "function", function: { name: fn.name, arguments: (fn.arguments ?? {}) as Record<string, unknown> } };
      }),
    } : {}),
  };
}

function tools(raw: unknown, options: ServerOptions, model: string): ToolDefinitionBody[] | null {
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return null;
  if (!Array.isArray(raw)) throw new ApiError("badRequest", "tools must be a list");
  // ollama: a model whose template takes no tools answers this; fennec parses calls only with --tool-call-parser
  if ((options.chat?.toolCallParser ?? null) === null) throw new ApiError("badRequest", `"${model}" does not support tools (start fennec with --enable-auto-tool-choice --tool-call-parser <parser>)`);
  return raw.map((t: unknown, i) => {
    const fn = (t as { function?: Record<string, unknown> } | null)?.function;
    if (typeof fn?.["name"] !== "string") throw new ApiError("badRequest", `tools[${i}].function.name must be a string`);
    return { type: (t as { type?: string }).type ?? "function", function: fn as ToolDefinitionBody["function"] };
  });
}

/** The messages of a chat body (an empty list is Ollama's "load the model" request). */
export function chatMessages(body: Body): ChatMessageBody[] {
  const raw = body["messages"];
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new ApiError("badRequest", "messages must be a list");
  return raw.map(message);
}

export function chatGenerationBody(options: ServerOptions, model: string, body: Body, messages: ChatMessageBody[], fields: CommonFields): ChatGenerationBody {
  const toolList = tools(body["tools"], options, model);
  return {
    ...vllmFields(options, model, fields),
    messages,
    ...(toolList !== null ? { tools: toolList, tool_choice: "auto" } : {}),
  } as ChatGenerationBody;
}
