/**
 * An Anthropic Messages body -> vLLM's chat fields (ChatGenerationBody), the way vLLM converts it
 * (vllm/entrypoints/anthropic/serving.py AnthropicServingMessages._convert_anthropic_to_openai_request): system text
 * joined into one leading system message, blocks into OpenAI messages (tool_use -> tool_calls, tool_result -> a `tool`
 * message before the rest of the user turn, thinking -> `reasoning`, image -> an image_url part in block order), tools -> functions, tool_choice any -> required,
 * stop_sequences -> stop. Every field is checked here by hand so that each refusal is an Anthropic
 * `invalid_request_error` naming its path. Framework-free; throws ApiError (400).
 * @example const { body, maxTokens } = toChatGeneration(raw, chatServing, false);
 */
import type { ChatServingOptions } from "../chat-serving.ts";
import { ApiError } from "../errors.ts";
import type { ChatGenerationBody } from "../generation/prepare-generation.ts";
import { REASONING_PARSERS } from "../openai/reasoning-parsers/registry.ts";
import type { ChatMessageBody, ToolDefinitionBody } from "../openai/schemas.ts";
import { refuseMessageFields } from "./message-fields.ts";
import { imageBlockPart } from "./image-blocks.ts";

type Json = Record<string, unknown>;

/** Anthropic's documented minimum thinking budget. */
export const MIN_THINKING_BUDGET_TOKENS = 1024;

/** Claude Code puts a per-request hash in a system block starting with this; vLLM drops it (it defeats prefix caching). */
const BILLING_HEADER = "x-anthropic-billing-header";

/** Keys each content block may carry besides `type` (cache_control everywhere: prompt caching here is automatic). */
const BLOCK_KEYS: Readonly<Record<string, readonly string[]>> = {
  text: ["text", "cache_control", "citations"],
  tool_use: ["id", "name", "input", "cache_control"],
  tool_result: ["tool_use_id", "content", "is_error", "cache_control"],
  thinking: ["thinking", "signature"],
  redacted_thinking: ["data"],
  // a tool search's answer: the named deferred tool is loaded (its definition joins the prompt's tools)
  tool_reference: ["tool_name", "name", "cache_control"],
  image: ["source", "cache_control"],
};

/** Blocks fennec cannot read, with the reason the 400 gives. */
const REFUSED_BLOCKS: Readonly<Record<string, string>> = {
  document: "fennec reads no documents (PDF or text sources); send the text in a text block",
  search_result: "search result blocks are not supported",
  server_tool_use: "server tools run on Anthropic's platform, not here",
  web_search_tool_result: "server tools run on Anthropic's platform, not here",
  container_upload: "code-execution containers are not supported",
};

const TOOL_CHOICES = ["auto", "any", "tool", "none"] as const;
const THINKING_TYPES = ["enabled", "disabled", "adaptive"] as const;
const EFFORTS = ["low", "medium", "high", "xhigh", "max"] as const;

export interface AnthropicGeneration {
  /** the request in vLLM's chat names, for prepareChatGeneration */
  readonly body: ChatGenerationBody;
  readonly maxTokens: number;
  readonly stream: boolean;
  readonly model: string;
  /** thinking enabled: the most reasoning tokens before the reasoning is closed; null = no budget */
  readonly thinkingBudgetTokens: number | null;
  readonly stopSequences: readonly string[];
}

const bad = (path: string, message: string): ApiError => new ApiError("badRequest", `${path}: ${message}`, path);

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function object(v: unknown, path: string): Json {
  if (!isObject(v)) throw bad(path, "Input should be an object");
  return v;
}

function string(v: unknown, path: string): string {
  if (typeof v !== "string") throw bad(path, "Input should be a valid string");
  return v;
}

function array(v: unknown, path: string): unknown[] {
  if (!Array.isArray(v)) throw bad(path, "Input should be a valid list");
  return v;
}

function integer(v: unknown, path: string, min: number): number {
  if (typeof v !== "number" || !Number.isInteger(v)) throw bad(path, "Input should be a valid integer");
  if (v < min) throw bad(path, `Input should be greater than or equal to ${min}`);
  return v;
}

function optionalNumber(v: unknown, path: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number") throw bad(path, "Input should be a valid number");
  return v;
}

function oneOf<T extends string>(v: unknown, allowed: readonly T[], path: string): T {
  if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) throw bad(path, `Input should be ${allowed.map((a) => `'${a}'`).join(", ")}`);
  return v as T;
}

function checkKeys(block: Json, allowed: readonly string[], path: string): void {
  for (const key of Object.keys(block)) {
    if (key !== "type" && !allowed.includes(key)) throw bad(`${path}.${key}`, "Extra inputs are not permitted");
  }
}

/** A block's type, checked against the blocks fennec reads. */
function blockType(block: Json, path: string): string {
  const type = string(block["type"], `${path}.type`);
  const refused = REFUSED_BLOCKS[type];
  if (refused !== undefined) throw bad(`${path}.type`, `${type} blocks are not supported: ${refused}`);
  const keys = BLOCK_KEYS[type];
  if (keys === undefined) throw bad(`${path}.type`, `unknown content block type '${type}'`);
  checkKeys(block, keys, path);
  return type;
}

/** The system prompt's text: a string or text blocks, joined without separator (vLLM). */
function systemText(system: unknown): string {
  if (system === undefined || system === null) return "";
  if (typeof system === "string") return system;
  return array(system, "system").map((b, i) => {
    const block = object(b, `system[${i}]`);
    if (blockType(block, `system[${i}]`) !== "text") throw bad(`system[${i}].type`, "system blocks must be text blocks");
    const text = string(block["text"], `system[${i}].text`);
    return text.startsWith(BILLING_HEADER) ? "" : text;
  }).join("");
}

/** The tool a tool_reference block names (vLLM reads `tool_name`, else `name`). */
function referencedTool(block: Json, path: string): string {
  return string(block["tool_name"] ?? block["name"], `${path}.tool_name`);
}

/**
 * A tool_result's content: a string or text and tool_reference blocks; the texts joined with newlines (vLLM), the
 * references added to `references`; is_error is said in the text.
 */
function toolResultText(block: Json, path: string, references: Set<string>): string {
  const content = block["content"];
  let text = "";
  if (typeof content === "string") text = content;
  else if (content !== undefined && content !== null) {
    text = array(content, `${path}.content`).flatMap((p, i) => {
      const part = object(p, `${path}.content[${i}]`);
      const type = blockType(part, `${path}.content[${i}]`);
      if (type === "tool_reference") {
        references.add(referencedTool(part, `${path}.content[${i}]`));
        return [];
      }
      if (type !== "text") throw bad(`${path}.content[${i}].type`, "tool results may hold text and tool_reference blocks only");
      return [string(part["text"], `${path}.content[${i}].text`)];
    }).join("\n");
  }
  // the template has no place for the flag: the model reads it in the result itself
  return block["is_error"] === true ? `Error: ${text}` : text;
}

/** One Anthropic turn -> the OpenAI messages it becomes (tool results first, as vLLM orders them). */
function convertTurn(turn: Json, i: number, references: Set<string>): ChatMessageBody[] {
  const path = `messages[${i}]`;
  checkKeys(turn, ["role", "content"], path);
  const role = oneOf(turn["role"], ["user", "assistant", "system"] as const, `${path}.role`);
  const content = turn["content"];
  if (typeof content === "string") return [{ role, content }];
  const blocks = array(content, `${path}.content`);
  const out: ChatMessageBody[] = [];
  const texts: string[] = [];
  // text and image parts in block order, for a turn with images (vLLM's content parts)
  const parts: { type: string; text?: string }[] = [];
  const reasoning: string[] = [];
  const toolCalls: NonNullable<ChatMessageBody["tool_calls"]>[number][] = [];
  blocks.forEach((b, j) => {
    const bpath = `${path}.content[${j}]`;
    const block = object(b, bpath);
    const type = blockType(block, bpath);
    const mustBe = (want: string) => {
      if (role !== want) throw bad(`${bpath}.type`, `${type} blocks belong in ${want} messages`);
    };
    switch (type) {
      case "text": {
        const text = string(block["text"], `${bpath}.text`);
        texts.push(text);
        parts.push({ type: "text", text });
        break;
      }
      case "image": mustBe("user"); parts.push(imageBlockPart(block, bpath)); break;
      case "thinking": mustBe("assistant"); reasoning.push(string(block["thinking"], `${bpath}.thinking`)); break;
      // opaque (encrypted by Anthropic): nothing a local model could read; vLLM drops it too
      case "redacted_thinking": mustBe("assistant"); break;
      case "tool_use": {
        mustBe("assistant");
        const input = block["input"] === undefined ? {} : object(block["input"], `${bpath}.input`);
        toolCalls.push({ id: string(block["id"], `${bpath}.id`), type: "function", function: { name: string(block["name"], `${bpath}.name`), arguments: JSON.stringify(input) } });
        break;
      }
      case "tool_result":
        mustBe("user");
        out.push({ role: "tool", tool_call_id: string(block["tool_use_id"], `${bpath}.tool_use_id`), content: toolResultText(block, bpath, references) });
        break;
      case "tool_reference": mustBe("user"); references.add(referencedTool(block, bpath)); break;
    }
  });
  // a user turn of tool results only adds no user message (vLLM)
  const hasImages = parts.length > texts.length;
  if (texts.length === 0 && !hasImages && toolCalls.length === 0 && reasoning.length === 0 && out.length > 0) return out;
  const message: ChatMessageBody = {
    // several text blocks read as vLLM's text parts do once rendered as a string: joined with newlines; with images,
    // the parts in block order (each image's marker where its block was)
    role, content: hasImages ? parts : texts.join("\n"),
    ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
    ...(reasoning.length > 0 ? { reasoning: reasoning.join("") } : {}),
  };
  return [...out, message];
}

/**
 * Client tools -> functions. A tool with defer_loading true is left out until a tool_reference in the conversation
 * names it: Anthropic keeps its definition out of the model's context until a tool search turns it up.
 */
function convertTools(tools: unknown, references: ReadonlySet<string>): ToolDefinitionBody[] | undefined {
  if (tools === undefined || tools === null) return undefined;
  const converted = array(tools, "tools").map((t, i) => {
    const path = `tools[${i}]`;
    const tool = object(t, path);
    if (tool["type"] !== undefined && tool["type"] !== null && tool["type"] !== "custom") {
      throw bad(`${path}.type`, `server tools ('${String(tool["type"])}') run on Anthropic's platform; fennec takes client tools (name, description, input_schema) only`);
    }
    checkKeys(tool, ["name", "description", "input_schema", "cache_control", "strict", "defer_loading"], path);
    if (tool["defer_loading"] !== undefined && tool["defer_loading"] !== null && typeof tool["defer_loading"] !== "boolean") throw bad(`${path}.defer_loading`, "Input should be a valid boolean");
    if (tool["defer_loading"] === true && !references.has(string(tool["name"], `${path}.name`))) return null;
    if (tool["strict"] !== undefined && tool["strict"] !== null && tool["strict"] !== false) throw bad(`${path}.strict`, "strict tools are not supported (use tool_choice any or tool: forced calls follow the schema)");
    const schema = object(tool["input_schema"], `${path}.input_schema`);
    const description = tool["description"] === undefined ? null : string(tool["description"], `${path}.description`);
    // vLLM: a schema without a type is an object schema
    return { type: "function", function: { name: string(tool["name"], `${path}.name`), description, parameters: { type: "object", ...schema } } };
  }).filter((t) => t !== null);
  return converted.length === 0 ? undefined : converted;
}

/** tool_choice -> vLLM's (any -> required, tool -> named) and parallel_tool_calls. */
function convertToolChoice(choice: unknown): Pick<ChatGenerationBody, "tool_choice" | "parallel_tool_calls"> {
  if (choice === undefined || choice === null) return {};
  const c = object(choice, "tool_choice");
  const type = oneOf(c["type"], TOOL_CHOICES, "tool_choice.type");
  checkKeys(c, type === "tool" ? ["name", "disable_parallel_tool_use"] : ["disable_parallel_tool_use"], "tool_choice");
  const disable = c["disable_parallel_tool_use"];
  if (disable !== undefined && typeof disable !== "boolean") throw bad("tool_choice.disable_parallel_tool_use", "Input should be a valid boolean");
  const parallel = disable === true ? { parallel_tool_calls: false } : {};
  switch (type) {
    case "auto": return { tool_choice: "auto", ...parallel };
    case "any": return { tool_choice: "required", ...parallel };
    case "none": return { tool_choice: "none" };
    case "tool": return { tool_choice: { type: "function", function: { name: string(c["name"], "tool_choice.name") } }, ...parallel };
  }
}

/** thinking -> the template switch of the reasoning parser, and the budget (null when none applies). */
function convertThinking(thinking: unknown, maxTokens: number | null, chat: ChatServingOptions): { kwargs: Json; budget: number | null; omitted: boolean } {
  if (thinking === undefined || thinking === null) return { kwargs: {}, budget: null, omitted: false };
  const t = object(thinking, "thinking");
  const type = oneOf(t["type"], THINKING_TYPES, "thinking.type");
  checkKeys(t, type === "enabled" ? ["budget_tokens", "display"] : type === "adaptive" ? ["display"] : [], "thinking");
  // display omitted: the model still thinks, the answer leaves the thinking out (include_reasoning false)
  const omitted = t["display"] !== undefined && t["display"] !== null && oneOf(t["display"], ["summarized", "omitted"] as const, "thinking.display") === "omitted";
  return { ...thinkingSwitch(t, type, maxTokens, chat), omitted };
}

function thinkingSwitch(t: Json, type: (typeof THINKING_TYPES)[number], maxTokens: number | null, chat: ChatServingOptions): { kwargs: Json; budget: number | null } {
  const parser = chat.reasoningParser === null ? null : REASONING_PARSERS[chat.reasoningParser]!;
  // the parser's own switch; without a parser, the name most templates read (Qwen3, DeepSeek, granite)
  const kwarg = parser?.thinkingKwarg?.name ?? "enable_thinking";
  if (type === "adaptive") return { kwargs: {}, budget: null };
  if (type === "disabled") return { kwargs: { [kwarg]: false }, budget: null };
  const budget = integer(t["budget_tokens"], "thinking.budget_tokens", MIN_THINKING_BUDGET_TOKENS);
  if (maxTokens !== null && budget >= maxTokens) throw bad("thinking.budget_tokens", `must be less than max_tokens (${maxTokens})`);
  if (parser === null) throw bad("thinking", "thinking needs a reasoning model served with --reasoning-parser (which splits the thinking from the answer)");
  if (parser.endToken === null) throw bad("thinking.budget_tokens", `the ${parser.name} reasoning parser has no single end token, so the budget cannot be enforced; use thinking {"type": "adaptive"}`);
  return { kwargs: parser.thinkingKwarg === null ? {} : { [kwarg]: true }, budget };
}

/**
 * context_management's clear_thinking_20251015 edit: the thinking of all but the last `keep` assistant turns that
 * have some is left out of the prompt (keep "all": none is).
 */
function clearThinking(management: unknown, messages: ChatMessageBody[]): ChatMessageBody[] {
  if (management === undefined || management === null) return messages;
  const m = object(management, "context_management");
  checkKeys(m, ["edits"], "context_management");
  let keep = Infinity;
  array(m["edits"] ?? [], "context_management.edits").forEach((e, i) => {
    const path = `context_management.edits[${i}]`;
    const edit = object(e, path);
    if (edit["type"] !== "clear_thinking_20251015") throw bad(`${path}.type`, `context edit '${String(edit["type"])}' is not supported (only clear_thinking_20251015)`);
    checkKeys(edit, ["keep"], path);
    const k = edit["keep"] ?? { type: "thinking_turns", value: 1 };
    if (k === "all") return;
    const turns = object(k, `${path}.keep`);
    oneOf(turns["type"], ["thinking_turns"] as const, `${path}.keep.type`);
    keep = Math.min(keep, integer(turns["value"], `${path}.keep.value`, 0));
  });
  if (keep === Infinity) return messages;
  let seen = 0;
  return messages.slice().reverse().map((message) => {
    if (message.role !== "assistant" || message.reasoning === undefined || message.reasoning === null) return message;
    if (seen++ < keep) return message;
    const { reasoning: _dropped, ...rest } = message;
    return rest;
  }).reverse();
}

function convertOutputConfig(config: unknown): Pick<ChatGenerationBody, "reasoning_effort" | "response_format"> {
  if (config === undefined || config === null) return {};
  const c = object(config, "output_config");
  checkKeys(c, ["effort", "format"], "output_config");
  const out: { reasoning_effort?: string; response_format?: ChatGenerationBody["response_format"] } = {};
  if (c["effort"] !== undefined && c["effort"] !== null) out.reasoning_effort = oneOf(c["effort"], EFFORTS, "output_config.effort");
  if (c["format"] !== undefined && c["format"] !== null) {
    const format = object(c["format"], "output_config.format");
    checkKeys(format, ["schema"], "output_config.format");
    oneOf(format["type"], ["json_schema"] as const, "output_config.format.type");
    out.response_format = { type: "json_schema", json_schema: { name: "json_schema", schema: object(format["schema"], "output_config.format.schema") } } as ChatGenerationBody["response_format"];
  }
  return out;
}

function stopSequences(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  return array(v, "stop_sequences").map((s, i) => string(s, `stop_sequences[${i}]`));
}

/**
 * The checked Messages body (or, with `countTokens`, a count_tokens body: no sampling fields, no max_tokens) in
 * vLLM's chat names.
 */
export function toChatGeneration(raw: unknown, chat: ChatServingOptions, countTokens: boolean): AnthropicGeneration {
  const body = object(raw, "body");
  refuseMessageFields(body, countTokens);
  const model = string(body["model"], "model");
  if (model === "") throw bad("model", "String should have at least 1 character");
  const maxTokens = countTokens ? null : body["max_tokens"] === undefined ? null : integer(body["max_tokens"], "max_tokens", 1);
  if (!countTokens && maxTokens === null) throw bad("max_tokens", "Field required");
  const turns = array(body["messages"], "messages");
  if (turns.length === 0) throw bad("messages", "at least one message is required");
  const references = new Set<string>();
  const converted = turns.map((t, i) => convertTurn(object(t, `messages[${i}]`), i, references));
  // inline system turns join the top-level system text (vLLM _convert_system_message)
  const inlineSystem = converted.flat().filter((m) => m.role === "system").map((m) => m.content as string);
  const system = [systemText(body["system"]), ...inlineSystem].join("");
  const messages = clearThinking(body["context_management"], [...(system === "" ? [] : [{ role: "system", content: system }]), ...converted.flat().filter((m) => m.role !== "system")]);
  // Anthropic's prefill: a final assistant turn is continued, not answered (the answer holds only the continuation)
  const last = messages.at(-1);
  const prefill = last !== undefined && last.role === "assistant" && (last.tool_calls ?? []).length === 0;
  const thinking = convertThinking(body["thinking"], maxTokens, chat);
  const requestKwargs = body["chat_template_kwargs"] === undefined || body["chat_template_kwargs"] === null ? {} : object(body["chat_template_kwargs"], "chat_template_kwargs");
  if (body["stream"] !== undefined && body["stream"] !== null && typeof body["stream"] !== "boolean") throw bad("stream", "Input should be a valid boolean");
  if (body["metadata"] !== undefined && body["metadata"] !== null) checkKeys(object(body["metadata"], "metadata"), ["user_id"], "metadata");
  if (body["service_tier"] !== undefined && body["service_tier"] !== null) oneOf(body["service_tier"], ["auto", "standard_only"] as const, "service_tier");
  const toolChoice = convertToolChoice(body["tool_choice"]);
  // Anthropic's own rule: a forced call leaves no room for thinking (and the call's grammar would hold it back)
  if (thinking.budget !== null && toolChoice.tool_choice !== undefined && toolChoice.tool_choice !== "auto" && toolChoice.tool_choice !== "none") {
    throw bad("thinking", "Thinking may not be enabled when tool_choice forces tool use.");
  }
  const stop = stopSequences(body["stop_sequences"]);
  const kwargs = { ...requestKwargs, ...thinking.kwargs };
  const cacheSalt = body["cache_salt"] === undefined || body["cache_salt"] === null ? undefined : string(body["cache_salt"], "cache_salt");
  const generation: ChatGenerationBody = {
    messages,
    tools: convertTools(body["tools"], references),
    ...(prefill ? { add_generation_prompt: false, continue_final_message: true } : {}),
    ...toolChoice,
    ...(Object.keys(kwargs).length > 0 ? { chat_template_kwargs: kwargs } : {}),
    ...(thinking.omitted ? { include_reasoning: false } : {}),
    ...(countTokens ? {} : {
      max_tokens: maxTokens,
      stop,
      temperature: optionalNumber(body["temperature"], "temperature"),
      top_p: optionalNumber(body["top_p"], "top_p"),
      top_k: optionalNumber(body["top_k"], "top_k"),
      ...convertOutputConfig(body["output_config"]),
      ...(cacheSalt === undefined ? {} : { cache_salt: cacheSalt }),
    }),
  };
  return { body: generation, maxTokens: maxTokens ?? 0, stream: body["stream"] === true, model, thinkingBudgetTokens: thinking.budget, stopSequences: stop };
}
