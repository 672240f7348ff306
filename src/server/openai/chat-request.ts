/**
 * The chat side of a request, checked and prepared the way vLLM's serving_chat does before it generates: tool_choice
 * against the tools and the server's parsers (protocol.py check_tool_usage and the serving checks, same messages),
 * the template fields (continue_final_message, a request's own chat_template, chat_template_kwargs merged over
 * --default-chat-template-kwargs), the rendered prompt, and how the output will be parsed (chat-output.ts).
 * Framework-free; throws ApiError (400) naming the parameter.
 */
import type { ChatMessage, ChatTemplateOptions, Tokenizer } from "../../tokenizer/tokenizer.ts";
import { DEFAULT_CHAT_SERVING, type ChatServingOptions } from "../chat-serving.ts";
import { ApiError } from "../errors.ts";
import type { ChatOutputConfig } from "./chat-output.ts";
import { REASONING_PARSERS } from "./reasoning-parsers/registry.ts";
import { TOOL_PARSERS } from "./tool-parsers/registry.ts";
import type { ToolDefinition } from "./tool-parsers/tool-definition.ts";
import { namedCallParser, requiredCallsParser, toolChoiceSchema } from "./tool-parsers/forced-calls.ts";
import type { GrammarSpec } from "../../grammar/grammar-spec.ts";
import { checkThinkingTokenBudget } from "./thinking-token-budget.ts";
import type { ChatMessageBody, ToolDefinitionBody } from "./schemas.ts";
import { isTemplateImagePart } from "./chat-completion/image-inputs.ts";

/** The request fields this file reads (chat completions; /tokenize's chat form has the template ones). */
export interface ChatRequestFields {
  readonly messages: readonly ChatMessageBody[];
  readonly add_generation_prompt?: boolean | null;
  readonly continue_final_message?: boolean | null;
  readonly tools?: readonly ToolDefinitionBody[] | null;
  readonly tool_choice?: string | Record<string, unknown> | null;
  readonly parallel_tool_calls?: boolean | null;
  readonly documents?: readonly Record<string, unknown>[] | null;
  readonly chat_template?: string | null;
  readonly chat_template_kwargs?: Record<string, unknown> | null;
  readonly reasoning_effort?: string | null;
  readonly include_reasoning?: boolean | null;
  readonly thinking_token_budget?: number | null;
}

export type ToolChoice = "none" | "auto" | "required" | { readonly name: string };

const NAMED_USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';

/** vLLM's ChatCompletionRequest.check_tool_usage, then the server-side parser checks of serving_chat. */
export function resolveToolChoice(body: ChatRequestFields, chat: ChatServingOptions): ToolChoice {
  const tools = body.tools;
  if (tools !== undefined && tools !== null && tools.length === 0) {
    throw new ApiError("badRequest", "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.", "tools");
  }
  tools?.forEach((tool, i) => {
    if (tool.type !== "function") throw new ApiError("badRequest", `tools[${i}].type must be "function", got ${JSON.stringify(tool.type)}.`, `tools[${i}].type`);
  });
  const raw = body.tool_choice;
  let choice: ToolChoice;
  if (raw === undefined || raw === null) choice = tools ? "auto" : "none";
  else if (raw === "none") return "none";
  else {
    if (!tools) throw new ApiError("badRequest", "When using `tool_choice`, `tools` must be set.", "tool_choice");
    if (typeof raw === "string") {
      if (raw !== "auto" && raw !== "required") {
        throw new ApiError("badRequest", `Invalid value for \`tool_choice\`: ${raw}! Only named tools, "none", "auto" or "required" are supported.`, "tool_choice");
      }
      choice = raw;
    } else {
      const fn = raw["function"];
      if (fn === null || typeof fn !== "object" || Array.isArray(fn)) {
        throw new ApiError("badRequest", `Invalid value for \`function\`: \`${JSON.stringify(fn ?? null)}\` in \`tool_choice\`! ${NAMED_USAGE}`, "tool_choice");
      }
      const name = (fn as Record<string, unknown>)["name"];
      if (name === undefined) throw new ApiError("badRequest", `Expected field \`name\` in \`function\` in \`tool_choice\`! ${NAMED_USAGE}`, "tool_choice");
      if (typeof name !== "string" || name === "") throw new ApiError("badRequest", `Invalid \`name\` in \`function\`: \`${JSON.stringify(name)}\` in \`tool_choice\`! ${NAMED_USAGE}`, "tool_choice");
      if (!tools.some((t) => t.function.name === name)) throw new ApiError("badRequest", "The tool specified in `tool_choice` does not match any of the specified `tools`", "tool_choice");
      choice = { name };
    }
  }
  if (choice === "auto" && (!chat.enableAutoToolChoice || chat.toolCallParser === null)) {
    throw new ApiError("badRequest", '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', "tool_choice");
  }
  if (choice === "required" || typeof choice === "object") {
    const what = choice === "required" ? 'tool_choice="required"' : `tool_choice=function "${choice.name}"`;
    if (chat.toolCallParser === null) throw new ApiError("badRequest", `${what} requires --tool-call-parser to be set`, "tool_choice");
  }
  return choice;
}

/** Messages as the tokenizer takes them: text-only content, `reasoning_content` renamed `reasoning` (vLLM). */
export function toChatMessages(messages: readonly ChatMessageBody[]): ChatMessage[] {
  return messages.map((m, i) => {
    if (Array.isArray(m.content)) {
      m.content.forEach((part, j) => {
        // pydantic's own words for a text part without its text (ChatCompletionContentPartTextParam requires `text`)
        if (part.type === "text" && part.text === undefined) {
          throw new ApiError("invalidBody", `1 validation error: 'messages[${i}].content[${j}].text' is required`, `messages[${i}].content[${j}].text`);
        }
        // image parts reach the template only as the markers of encoded images (chat-completion/image-inputs.ts)
        if (isTemplateImagePart(part)) return;
        if (part.type !== "text") {
          throw new ApiError("badRequest", `messages[${i}].content[${j}]: only text parts are supported (got type "${part.type}")`, `messages[${i}].content[${j}].type`);
        }
      });
    }
    const { reasoning_content: oldReasoning, ...rest } = m;
    const message: Record<string, unknown> = { ...rest, content: m.content ?? null };
    if ((m.reasoning === undefined || m.reasoning === null) && oldReasoning !== undefined && oldReasoning !== null) message["reasoning"] = oldReasoning;
    for (const key of ["tool_calls", "tool_call_id", "reasoning", "name"]) if (message[key] === undefined || message[key] === null) delete message[key];
    return message as unknown as ChatMessage;
  });
}

const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/**
 * vLLM's template kwargs: --default-chat-template-kwargs < request chat_template_kwargs < explicit fields
 * (reasoning_effort and the enable_thinking it implies); `chat_template` and `tokenize` keys are refused.
 */
export function templateKwargs(body: ChatRequestFields, chat: ChatServingOptions): Record<string, unknown> {
  const requested = body.chat_template_kwargs ?? {};
  const unexpected = Object.keys(requested).filter((k) => k === "chat_template" || k === "tokenize");
  if (unexpected.length > 0) {
    if (unexpected.includes("chat_template") && !chat.trustRequestChatTemplate) throw untrustedTemplate("chat_template_kwargs");
    throw new ApiError("badRequest", `Found unexpected chat template kwargs from request: ${JSON.stringify(Object.fromEntries(unexpected.map((k) => [k, requested[k]])))}`, "chat_template_kwargs");
  }
  const kwargs: Record<string, unknown> = { ...chat.defaultTemplateKwargs };
  for (const [k, v] of Object.entries(requested)) if (v !== null && v !== "auto") kwargs[k] = v;
  const effort = body.reasoning_effort;
  if (effort !== undefined && effort !== null) {
    if (!REASONING_EFFORTS.includes(effort)) {
      throw new ApiError("badRequest", `reasoning_effort must be one of ${REASONING_EFFORTS.join(", ")}, got ${JSON.stringify(effort)}.`, "reasoning_effort");
    }
    kwargs["reasoning_effort"] = effort;
    if (!("enable_thinking" in requested)) kwargs["enable_thinking"] = effort !== "none";
  }
  return kwargs;
}

const untrustedTemplate = (param: string) =>
  new ApiError("badRequest", "Chat template is passed with request, but --trust-request-chat-template is not set. Refused request with untrusted chat template.", param);

/** Everything the template gets besides the messages. */
export function templateOptions(body: ChatRequestFields, chat: ChatServingOptions, toolChoice: ToolChoice): ChatTemplateOptions {
  if (body.continue_final_message === true && body.add_generation_prompt === true) {
    throw new ApiError("badRequest", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.", "continue_final_message");
  }
  if (body.chat_template !== undefined && body.chat_template !== null && !chat.trustRequestChatTemplate) throw untrustedTemplate("chat_template");
  const showTools = body.tools !== undefined && body.tools !== null && !(toolChoice === "none" && chat.excludeToolsWhenToolChoiceNone);
  return {
    addGenerationPrompt: body.add_generation_prompt ?? true,
    continueFinalMessage: body.continue_final_message ?? false,
    tools: showTools ? body.tools : null,
    documents: body.documents ?? null,
    kwargs: templateKwargs(body, chat),
    template: body.chat_template ?? chat.chatTemplate,
    contentFormat: chat.contentFormat,
  };
}

/**
 * The chat template turned into prompt text. Templates may refuse a conversation (`raise_exception`, e.g. roles that
 * do not alternate): that is the client's input, so a 400 naming `messages`, as vLLM answers.
 */
export function renderChatPrompt(tokenizer: Tokenizer, messages: readonly ChatMessage[], options: ChatTemplateOptions): string {
  try {
    return tokenizer.applyChatTemplate(messages, options);
  } catch (error) {
    const message = error instanceof Error ? error.message.split("\n")[0]! : String(error);
    throw new ApiError("badRequest", `The chat template could not render these messages: ${message}`, "messages");
  }
}

/** A prepared chat request: the prompt and how its output is parsed. */
export interface PreparedChat {
  readonly prompt: string;
  readonly toolChoice: ToolChoice;
  readonly output: ChatOutputConfig;
  /** vLLM's adjust_request: the tool parser needs special tokens (e.g. <tool_call>) left in the text */
  readonly keepSpecialTokens: boolean;
  /** tool_choice required / named: the JSON schema grammar the output must follow (vLLM's adjust_request) */
  readonly grammar: GrammarSpec | null;
  /** the grammar (this one or response_format's) starts after these tokens: chat-request.ts reasoningEndTokenIds */
  readonly reasoningEndTokenIds: readonly number[] | null;
  /** vLLM's thinking_token_budget to enforce (thinking-token-budget.ts); null = none (absent or -1) */
  readonly thinkingTokenBudget: number | null;
}

/**
 * The reasoning gate of a structured-output grammar (vLLM's reasoner.is_reasoning_end on token ids, used by
 * vllm/v1/structured_output/__init__.py should_advance / should_fill_bitmask): the id of the parser's one end token,
 * or null, so the grammar holds from the first token, when there is no parser, the prompt already ends the reasoning
 * (Qwen3 with enable_thinking false), or the end is not a single token of this vocabulary (granite, openai_gptoss).
 */
export function reasoningEndTokenIds(tokenizer: Tokenizer, reasoning: ChatOutputConfig["reasoning"]): readonly number[] | null {
  if (reasoning === null || reasoning.promptEndsReasoning || reasoning.parser.endToken === null) return null;
  const ids = tokenizer.encode(reasoning.parser.endToken, { addSpecial: false, parseSpecial: true });
  return ids.length === 1 ? ids : null;
}

/** `disableAnyWhitespace`: --structured-outputs-config's, for the forced tool choice's grammar (vLLM's server setting). */
export function prepareChat(tokenizer: Tokenizer, body: ChatRequestFields, chat: ChatServingOptions = DEFAULT_CHAT_SERVING, disableAnyWhitespace = false): PreparedChat {
  const reasoningParser = chat.reasoningParser === null ? null : REASONING_PARSERS[chat.reasoningParser]!;
  const thinkingTokenBudget = checkThinkingTokenBudget(body.thinking_token_budget, reasoningParser);
  const toolChoice = resolveToolChoice(body, chat);
  const options = templateOptions(body, chat, toolChoice);
  const prompt = renderChatPrompt(tokenizer, toChatMessages(body.messages), options);
  const forced = toolChoice === "required" ? "required" : typeof toolChoice === "object" ? "named" : null;
  let grammar: GrammarSpec | null = null;
  if (forced !== null) {
    if (tokenizer.grammarVocabulary === undefined) throw new ApiError("badRequest", "tool_choice required or named needs structured-output decoding, which this model's tokenizer cannot drive.", "tool_choice");
    const built = toolChoiceSchema(body.tools as readonly ToolDefinition[], toolChoice as "required" | { name: string });
    if ("error" in built) throw new ApiError("badRequest", built.error, "tools");
    grammar = { kind: "json", schema: JSON.stringify(built.schema), anyWhitespace: !disableAnyWhitespace };
  }
  const toolParser = forced === "required" ? requiredCallsParser
    : typeof toolChoice === "object" ? namedCallParser(toolChoice.name)
    : toolChoice === "auto" && chat.toolCallParser !== null ? TOOL_PARSERS[chat.toolCallParser]! : null;
  let reasoning: ChatOutputConfig["reasoning"] = null;
  if (reasoningParser !== null) {
    const kwarg = reasoningParser.thinkingKwarg;
    const thinking = kwarg === null ? true : options.kwargs?.[kwarg.name] ?? kwarg.default;
    reasoning = {
      parser: reasoningParser,
      context: { thinkingEnabled: thinking !== false },
      // (an ungated grammar turns this on too: chat-output.ts outputAfterGrammar)
      promptEndsReasoning: reasoningParser.promptEndsReasoning(prompt),
      include: body.include_reasoning ?? true,
    };
  }
  return {
    prompt,
    toolChoice,
    output: {
      reasoning,
      tools: toolParser === null ? null : { parser: toolParser, definitions: body.tools as readonly ToolDefinition[], parallel: body.parallel_tool_calls ?? true, forced },
    },
    keepSpecialTokens: toolParser?.keepSpecialTokens === true || reasoningParser?.keepSpecialTokens === true,
    grammar,
    reasoningEndTokenIds: reasoningEndTokenIds(tokenizer, reasoning),
    thinkingTokenBudget,
  };
}

/** vLLM's get_chat_request_role: --response-role, unless the prompt continues the last message (no generation prompt). */
export function responseRole(body: Pick<ChatRequestFields, "messages" | "add_generation_prompt">, chat: ChatServingOptions = DEFAULT_CHAT_SERVING): string {
  return (body.add_generation_prompt ?? true) ? chat.responseRole : (body.messages.at(-1)?.role ?? chat.responseRole);
}
