/**
 * Responses input items -> chat messages, as vLLM does on its non-Harmony path (vllm/entrypoints/openai/responses/
 * utils.py construct_input_messages, _construct_message_from_response_item): messages pass through with their text
 * parts, a function_call joins the previous assistant message's tool_calls, a function_call_output becomes a `tool`
 * message, a reasoning item the assistant's `reasoning`. An input_image becomes the chat path's image_url part (vLLM
 * chat_utils reads input_image the same way; the projector and media rules apply there). What fennec cannot read
 * (audio, files, images by file_id, encrypted reasoning, built-in tool items) is a 400 naming the item, never dropped.
 * @example toChatMessagesFromInput([{ role: "user", content: "Hi" }]) // [{ role: "user", content: "Hi" }]
 */
import { ApiError } from "../../errors.ts";
import type { ChatMessageBody } from "../schemas.ts";
import { dialectImagePart } from "../chat-completion/image-inputs.ts";

type Item = Readonly<Record<string, unknown>>;
type Part = { type: string; text?: string; image_url?: { url: string } };
type Message = { role: string; content?: string | Part[] | null; tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[]; tool_call_id?: string; reasoning?: string };

/** Content part types and what they become: text parts are kept, the rest are refused with a reason. */
const TEXT_PARTS = new Set(["input_text", "output_text", "text", "refusal"]);
const REFUSED_PARTS: Readonly<Record<string, string>> = {
  input_audio: "audio inputs are not supported",
  input_file: "file inputs are not supported",
};

const bad = (param: string, message: string) => new ApiError("badRequest", message, param);

function text(value: unknown, param: string): string {
  if (typeof value !== "string") throw bad(param, `${param} must be a string.`);
  return value;
}

/** OpenAI's input_image detail values: accepted, the projector fixes the resolution (as image_url.detail in chat). */
const IMAGE_DETAILS = ["low", "high", "auto"];

/** An input_image part: image_url as a URL or data URL; file_id needs a Files API fennec does not have. */
function imagePart(p: Item, where: string): Part {
  if (p["file_id"] !== undefined && p["file_id"] !== null) throw bad(`${where}.file_id`, `${where}: input_image by file_id is not supported (fennec has no Files API); send image_url as a URL or a data URL.`);
  const url = p["image_url"];
  if (typeof url !== "string" || url === "") throw bad(`${where}.image_url`, `${where}: an input_image needs image_url, a URL or a data URL (data:image/png;base64,...).`);
  const detail = p["detail"];
  if (detail !== undefined && detail !== null && !IMAGE_DETAILS.includes(detail as string)) throw bad(`${where}.detail`, `${where}.detail must be low, high or auto.`);
  return dialectImagePart(url, `${where}.image_url`);
}

/** A message's content: a string, or its text parts (refusals are read as their text, as vLLM's chat_utils does). */
function contentOf(content: unknown, param: string): Message["content"] {
  if (content === undefined || content === null || typeof content === "string") return content ?? null;
  if (!Array.isArray(content)) throw bad(param, `${param} must be a string or a list of content parts.`);
  return content.map((part: unknown, j) => {
    const where = `${param}[${j}]`;
    if (typeof part !== "object" || part === null) throw bad(where, `${where} must be an object.`);
    const p = part as Item;
    const type = String(p["type"]);
    const refused = REFUSED_PARTS[type];
    if (refused !== undefined) throw bad(`${where}.type`, `${where}: ${type} parts are refused: ${refused}.`);
    if (type === "input_image") return imagePart(p, where);
    if (!TEXT_PARTS.has(type)) throw bad(`${where}.type`, `${where}: unknown content part type ${JSON.stringify(type)} (expected input_text, output_text or input_image).`);
    return { type: "text", text: text(type === "refusal" ? p["refusal"] : p["text"], `${where}.${type === "refusal" ? "refusal" : "text"}`) };
  });
}

/** The text of a reasoning item: content[0] first, summary[0] as the fallback (vLLM). */
function reasoningText(item: Item, param: string): string {
  if (item["encrypted_content"] !== undefined && item["encrypted_content"] !== null) {
    throw bad(`${param}.encrypted_content`, "Encrypted content is not supported.");
  }
  for (const key of ["content", "summary"]) {
    const parts = item[key];
    if (Array.isArray(parts) && parts.length > 0) return text((parts[0] as Item)["text"], `${param}.${key}[0].text`);
  }
  return "";
}

/** vLLM flattens a namespaced function name as `namespace__name`. */
export const flatToolName = (name: string, namespace: unknown): string => (typeof namespace === "string" && namespace !== "" ? `${namespace}__${name}` : name);

/** The last message, when it is an assistant message that can still take tool calls / reasoning. */
function openAssistant(messages: Message[]): Message | null {
  const last = messages.at(-1);
  return last !== undefined && last.role === "assistant" ? last : null;
}

/** Appends one item's message(s) to `messages` (vLLM's merging of calls and reasoning into one assistant turn). */
function addItem(messages: Message[], item: Item, param: string): void {
  const type = item["type"];
  if (type === undefined || type === "message") {
    const role = text(item["role"], `${param}.role`);
    const content = contentOf(item["content"], `${param}.content`);
    const previous = openAssistant(messages);
    // an assistant message after a reasoning item of the same turn fills that message (vLLM merges them)
    if (role === "assistant" && previous !== null && (previous.content === null || previous.content === undefined) && previous.tool_calls === undefined) {
      previous.content = content;
      return;
    }
    messages.push({ role, content });
    return;
  }
  if (type === "function_call") {
    const name = flatToolName(text(item["name"], `${param}.name`), item["namespace"]);
    const call = { id: text(item["call_id"], `${param}.call_id`), type: "function", function: { name, arguments: text(item["arguments"], `${param}.arguments`) } };
    const previous = openAssistant(messages);
    if (previous !== null) (previous.tool_calls ??= []).push(call);
    else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    return;
  }
  if (type === "function_call_output") {
    const output = item["output"];
    const content = typeof output === "string" ? output : contentOf(output, `${param}.output`);
    messages.push({ role: "tool", tool_call_id: text(item["call_id"], `${param}.call_id`), content });
    return;
  }
  if (type === "reasoning") {
    const reasoning = reasoningText(item, param);
    const previous = openAssistant(messages);
    if (previous !== null && previous.reasoning === undefined && (previous.content === null || previous.content === undefined) && previous.tool_calls === undefined) previous.reasoning = reasoning;
    else messages.push({ role: "assistant", content: null, reasoning });
    return;
  }
  throw bad(`${param}.type`, `${param}: input items of type ${JSON.stringify(type)} are not supported (messages, function_call, function_call_output and reasoning are).`);
}

/** The chat messages of a Responses `input` (a string is one user message). */
export function inputToChatMessages(input: string | readonly Item[]): ChatMessageBody[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  const messages: Message[] = [];
  input.forEach((item, i) => addItem(messages, item, `input[${i}]`));
  return messages as ChatMessageBody[];
}

/**
 * vLLM's should_continue_final_message: the last input item is an assistant message (or reasoning) still
 * `in_progress` / `incomplete`, so the model continues it instead of opening a new turn (prefill).
 */
export function continuesFinalMessage(input: string | readonly Item[]): boolean {
  if (typeof input === "string") return false;
  const last = input.at(-1);
  if (last === undefined) return false;
  const open = last["status"] === "in_progress" || last["status"] === "incomplete";
  return open && (last["type"] === "reasoning" || ((last["type"] === undefined || last["type"] === "message") && last["role"] === "assistant"));
}
