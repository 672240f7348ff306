/**
 * The Responses request's preparation (vLLM vllm/entrypoints/openai/responses/serving.py create_responses up to the
 * generator): the Responses rules (store, background, previous_response_id, tools, tool_choice, text.format,
 * reasoning, include), then the body translated into vLLM's chat field names (ChatGenerationBody) and the shared
 * preparation (server/generation/prepare-generation.ts prepareChatGeneration). Everything the answer depends on is
 * fixed in a ResponseAnswer before anything runs. Framework-free; throws ApiError (400/404) naming the parameter.
 * @example const { request, answer } = await prepareResponse(options, body, context, store);
 */
import { ApiError } from "../../errors.ts";
import type { ServerOptions } from "../../server-options.ts";
import type { GenerateRequest } from "../../../frontend/orchestrator.ts";
import type { RequestContext } from "../../request-context.ts";
import { prepareChatGeneration, type ChatGenerationBody } from "../../generation/prepare-generation.ts";
import type { ChatOutputConfig } from "../chat-output.ts";
import type { ChatMessageBody, ToolDefinitionBody } from "../schemas.ts";
import type { ResponseFormatBody } from "../structured-outputs.ts";
import { checkModel, publicRequestId, unixSeconds } from "../wire-to-request.ts";
import { refuseOnPoolingModel } from "../embedding/prepare.ts";
import { logprobTokenizer } from "../logprobs.ts";
import type { Tokenizer } from "../../../tokenizer/tokenizer.ts";
import { continuesFinalMessage, flatToolName, inputToChatMessages } from "./input-items.ts";
import { ResponsesRequest, type ResponsesBody } from "./request-schema.ts";
import type { ResponseStore } from "./response-store.ts";

/** What the answer depends on, fixed before generation starts. */
export interface ResponseAnswer {
  readonly id: string;
  readonly createdAt: number;
  readonly model: string;
  readonly tokenizer: Tokenizer;
  readonly outputConfig: ChatOutputConfig;
  /** include message.output_text.logprobs: this many top alternatives; null = no logprobs */
  readonly topLogprobs: number | null;
  /** flattened `ns__name` tool names -> their namespace and name (vLLM's namespaced tools) */
  readonly namespaced: ReadonlyMap<string, { readonly namespace: string; readonly name: string }>;
  /** the request's fields the response object echoes (vLLM ResponsesResponse.from_request) */
  readonly echo: Readonly<Record<string, unknown>>;
  /** the chat messages the prompt was rendered from (stored for previous_response_id) */
  readonly inputMessages: readonly ChatMessageBody[];
  readonly enableResponseMessages: boolean;
  /** --enable-per-request-metrics: the response carries vLLM's `metrics` object */
  readonly enablePerRequestMetrics: boolean;
  readonly store: boolean;
  readonly background: boolean;
}

export interface PreparedResponse {
  readonly request: GenerateRequest;
  readonly answer: ResponseAnswer;
}

const bad = (param: string, message: string) => new ApiError("badRequest", message, param);

/** include values: implemented, accepted with a reason, or refused (fennec has no built-in tools, and images are not echoed). */
const INCLUDE_ACCEPTED = new Set(["message.output_text.logprobs", "reasoning.encrypted_content"]);

const notEmpty = (v: unknown): boolean => v !== undefined && v !== null && !(typeof v === "object" && Object.keys(v as object).length === 0);

/** Fields vLLM's Responses endpoint takes that fennec cannot honour: a 400 naming each, never ignored. */
function refuseFields(body: ResponsesBody): void {
  if (body.prompt !== undefined && body.prompt !== null) throw bad("prompt", "prompt template is not supported");
  if (body.conversation !== undefined && body.conversation !== null) throw bad("conversation", "conversation is not supported: use previous_response_id or send the whole input.");
  if (body.previous_input_messages !== undefined && body.previous_input_messages !== null) throw bad("previous_input_messages", "previous_input_messages is only for gpt-oss (Harmony) models; send the messages as input items.");
  if (body.max_tool_calls !== undefined && body.max_tool_calls !== null) throw bad("max_tool_calls", "max_tool_calls limits built-in tool loops, which fennec does not run; leave it out.");
  for (const name of ["vllm_xargs", "mm_processor_kwargs", "media_io_kwargs", "kv_transfer_params"] as const) {
    if (notEmpty(body[name])) throw bad(name, `${name} is not supported on /v1/responses.`);
  }
  const obfuscation = body.stream_options?.["include_obfuscation"];
  if (body.stream_options !== undefined && body.stream_options !== null && Object.keys(body.stream_options).some((k) => k !== "include_obfuscation")) throw bad("stream_options", "stream_options: only include_obfuscation is defined for /v1/responses.");
  if (obfuscation === true) throw bad("stream_options.include_obfuscation", "include_obfuscation: fennec adds no obfuscation padding to stream events; set it false or leave it out.");
  if (body.text?.verbosity !== undefined && body.text.verbosity !== null && body.text.verbosity !== "medium") throw bad("text.verbosity", "text.verbosity: no model fennec serves reads a verbosity setting; leave it out or use medium.");
  for (const [i, value] of (body.include ?? []).entries()) {
    if (!INCLUDE_ACCEPTED.has(value)) throw bad(`include[${i}]`, `include ${JSON.stringify(value)} is not supported (only message.output_text.logprobs and reasoning.encrypted_content).`);
  }
  if (body.truncation !== undefined && body.truncation !== null && body.truncation !== "auto" && body.truncation !== "disabled") throw bad("truncation", "truncation must be auto or disabled.");
}

/** Responses tools -> chat tools: function tools as they are, namespaces flattened to `ns__name` (vLLM). */
function chatTools(tools: readonly Readonly<Record<string, unknown>>[]): { tools: ToolDefinitionBody[]; namespaced: Map<string, { namespace: string; name: string }> } {
  const out: ToolDefinitionBody[] = [];
  const namespaced = new Map<string, { namespace: string; name: string }>();
  const fn = (tool: Readonly<Record<string, unknown>>, param: string, namespace: string | null): ToolDefinitionBody => {
    if (typeof tool["name"] !== "string" || tool["name"] === "") throw bad(`${param}.name`, `${param}.name must be a non-empty string.`);
    const parameters = tool["parameters"];
    if (parameters !== undefined && parameters !== null && (typeof parameters !== "object" || Array.isArray(parameters))) throw bad(`${param}.parameters`, `${param}.parameters must be a JSON schema object.`);
    const name = flatToolName(tool["name"], namespace);
    if (namespace !== null) namespaced.set(name, { namespace, name: tool["name"] });
    return {
      type: "function",
      function: {
        name,
        ...(typeof tool["description"] === "string" ? { description: tool["description"] } : {}),
        ...(parameters ? { parameters: parameters as Record<string, unknown> } : {}),
        ...(typeof tool["strict"] === "boolean" ? { strict: tool["strict"] } : {}),
      },
    };
  };
  tools.forEach((tool, i) => {
    const param = `tools[${i}]`;
    if (tool["type"] === "function") out.push(fn(tool, param, null));
    else if (tool["type"] === "namespace") {
      const inner = tool["tools"];
      if (typeof tool["name"] !== "string" || !Array.isArray(inner)) throw bad(param, `${param}: a namespace needs a name and a list of tools.`);
      inner.forEach((t: Readonly<Record<string, unknown>>, j) => {
        if (t["type"] !== "function") throw bad(`${param}.tools[${j}].type`, `${param}.tools[${j}]: only function tools are supported inside a namespace.`);
        out.push(fn(t, `${param}.tools[${j}]`, tool["name"] as string));
      });
    } else {
      throw bad(`${param}.type`, `${param}: tool type ${JSON.stringify(tool["type"])} is not supported: fennec runs no built-in tools (vLLM needs --tool-server for them); only function tools.`);
    }
  });
  return { tools: out, namespaced };
}

/** Responses tool_choice -> chat tool_choice, with vLLM's Responses messages. */
function chatToolChoice(choice: ResponsesBody["tool_choice"], tools: readonly ToolDefinitionBody[]): ChatGenerationBody["tool_choice"] {
  if (choice === undefined || choice === null) return tools.length > 0 ? "auto" : undefined;
  if (typeof choice === "string") {
    if (choice !== "auto" && choice !== "none" && choice !== "required") throw bad("tool_choice", `tool_choice must be auto, none, required or {"type": "function", "name": ...}, got ${JSON.stringify(choice)}.`);
    if (tools.length === 0) {
      if (choice === "required") throw bad("tool_choice", "Tool choice 'required' must be specified with 'tools' parameter.");
      return undefined;
    }
    return choice;
  }
  if (choice["type"] !== "function" || typeof choice["name"] !== "string") {
    throw bad("tool_choice", `tool_choice of type ${JSON.stringify(choice["type"])} is not supported (only {"type": "function", "name": ...}).`);
  }
  const name = flatToolName(choice["name"], choice["namespace"]);
  if (!tools.some((t) => t.function.name === name)) throw bad("tool_choice", "Tool choice 'function' not found in 'tools' parameter.");
  return { type: "function", function: { name } };
}

/** text.format -> response_format (json_schema's fields sit one level up in the Responses form). */
function responseFormat(format: Readonly<Record<string, unknown>> | null | undefined): ResponseFormatBody | undefined {
  if (format === undefined || format === null) return undefined;
  const type = format["type"];
  if (type === "text") return undefined;
  if (type === "json_object") return { type: "json_object" };
  if (type === "json_schema") {
    if (format["schema"] === undefined) throw bad("text.format.schema", "text.format of type json_schema needs a schema.");
    return { type: "json_schema", json_schema: { name: typeof format["name"] === "string" ? format["name"] : "response", schema: format["schema"], strict: typeof format["strict"] === "boolean" ? format["strict"] : null } };
  }
  throw bad("text.format.type", `text.format.type must be text, json_object or json_schema, got ${JSON.stringify(type)}.`);
}

/** vLLM's construct_input_messages: new instructions, the stored turn minus its system messages, its output, the input. */
function conversation(body: ResponsesBody, store: ResponseStore): ChatMessageBody[] {
  const messages: ChatMessageBody[] = [];
  if (body.instructions !== undefined && body.instructions !== null) messages.push({ role: "system", content: body.instructions });
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    const previous = store.get(body.previous_response_id);
    if (previous === undefined || !previous.done) {
      throw new ApiError("notFound", `Response with id '${body.previous_response_id}' not found.`, "previous_response_id");
    }
    messages.push(...previous.inputMessages.filter((m) => m.role !== "system"));
    messages.push(...previous.outputMessages);
  }
  messages.push(...inputToChatMessages(body.input));
  if (messages.length === 0) throw bad("input", "input must not be empty.");
  return messages;
}

/** The server's generation-config defaults (vLLM's default_sampling_params) for what the request leaves null. */
function withDefaults(body: ResponsesBody, defaults: Readonly<Record<string, number>>): { temperature?: number | null; top_p?: number | null; top_k?: number | null; repetition_penalty?: number | null; min_p?: number; maxTokens: number | null } {
  const pick = (value: number | null | undefined, key: string) => value ?? defaults[key] ?? null;
  return {
    temperature: pick(body.temperature, "temperature"), top_p: pick(body.top_p, "top_p"), top_k: pick(body.top_k, "top_k"),
    repetition_penalty: pick(body.repetition_penalty, "repetition_penalty"),
    ...(defaults["min_p"] !== undefined ? { min_p: defaults["min_p"] } : {}),
    maxTokens: pick(body.max_output_tokens, "max_new_tokens"),
  };
}

/** vLLM's DEBUG line for the top-level fields no row of the request schema names (protocol.py OpenAIBaseModel
 * __log_extra_fields__): the request is answered, as vLLM answers it; Codex's fields are all declared. */
function logUnknownFields(options: ServerOptions, keys: readonly string[] | null): void {
  const unknown = (keys ?? []).filter((k) => !(k in ResponsesRequest.properties));
  if (unknown.length > 0) options.log(`The following fields were present in the request but ignored: {${unknown.map((k) => `'${k}'`).join(", ")}}`, "DEBUG");
}

export async function prepareResponse(options: ServerOptions, body: ResponsesBody, context: RequestContext, store: ResponseStore): Promise<PreparedResponse> {
  const arrivalMs = context.arrivalMs;
  // a LoRA adapter's name runs the base model with it (vLLM _maybe_get_adapters); answers carry the adapter's name
  const loraName = options.lora?.has(body.model) === true ? body.model! : undefined;
  if (loraName === undefined) checkModel(body.model, options.servedModelName);
  refuseOnPoolingModel(options, "Responses");
  refuseFields(body);
  logUnknownFields(options, context.bodyKeys);
  const storeIt = body.store ?? true;
  const background = body.background ?? false;
  if (background && !storeIt) throw bad("background", "background can only be used when `store` is true");
  if (body.max_output_tokens !== undefined && body.max_output_tokens !== null && body.max_output_tokens < 1) {
    throw bad("max_output_tokens", `max_output_tokens must be at least 1, got ${body.max_output_tokens}.`);
  }
  const logprobs = (body.include ?? []).includes("message.output_text.logprobs");
  if ((body.top_logprobs ?? 0) < 0) throw bad("top_logprobs", "top_logprobs must be a non-negative value.");
  if (!logprobs && (body.top_logprobs ?? 0) > 0) throw bad("top_logprobs", "top_logprobs needs include: [\"message.output_text.logprobs\"] (without it no logprobs are returned).");
  const format = responseFormat(body.text?.format);
  if (format !== undefined && notEmpty(body.structured_outputs)) throw bad("text.format", "Cannot specify both structured_outputs and text.format");
  const { tools, namespaced } = chatTools(body.tools ?? []);
  const toolChoice = chatToolChoice(body.tool_choice, tools);
  const messages = conversation(body, store);
  const continues = continuesFinalMessage(body.input);
  const sampling = withDefaults(body, options.generationDefaults ?? {});
  const chatBody: ChatGenerationBody = {
    messages,
    ...(tools.length > 0 ? { tools } : {}),
    ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    reasoning_effort: body.reasoning?.effort ?? null,
    include_reasoning: body.include_reasoning ?? true,
    chat_template_kwargs: body.chat_template_kwargs ?? null,
    add_generation_prompt: !continues,
    continue_final_message: continues,
    temperature: sampling.temperature, top_p: sampling.top_p, top_k: sampling.top_k, repetition_penalty: sampling.repetition_penalty,
    ...(sampling.min_p !== undefined ? { min_p: sampling.min_p } : {}),
    presence_penalty: body.presence_penalty ?? null, frequency_penalty: body.frequency_penalty ?? null,
    logit_bias: body.logit_bias ?? null, seed: body.seed ?? null, stop: body.stop ?? null,
    ignore_eos: body.ignore_eos ?? null, skip_special_tokens: body.skip_special_tokens ?? null,
    include_stop_str_in_output: body.include_stop_str_in_output ?? null,
    priority: body.priority ?? null, cache_salt: body.cache_salt ?? null,
    truncate_prompt_tokens: body.truncation === "auto" ? -1 : null,
    ...(format !== undefined ? { response_format: format } : {}),
    ...(notEmpty(body.structured_outputs) ? { structured_outputs: body.structured_outputs as ChatGenerationBody["structured_outputs"] } : {}),
  };
  // vLLM: max_output_tokens is clamped to what the context has left, never refused for being large
  const generation = await prepareChatGeneration(options, chatBody, { maxTokens: { value: null, param: "max_tokens" }, logprobs: logprobs ? (body.top_logprobs ?? 0) : null });
  const maxTokens = Math.min(generation.sampling.maxTokens ?? Infinity, sampling.maxTokens ?? Infinity);
  const id = body.request_id ?? context.requestIdHeader ?? `resp_${publicRequestId(null, null)}`;
  const request: GenerateRequest = { requestId: `${id}-${crypto.randomUUID().slice(0, 8)}`, externalRequestId: id, promptTokenIds: generation.promptTokenIds, sampling: { ...generation.sampling, maxTokens }, arrivalMs, traceHeaders: context.traceHeaders, ...(loraName !== undefined ? { loraName } : {}) };
  const echo = {
    background, instructions: body.instructions ?? null, metadata: body.metadata ?? null,
    parallel_tool_calls: body.parallel_tool_calls ?? true, temperature: body.temperature ?? null, top_p: body.top_p ?? null,
    presence_penalty: body.presence_penalty ?? null, frequency_penalty: body.frequency_penalty ?? null,
    tool_choice: body.tool_choice ?? (tools.length > 0 ? "auto" : "none"), tools: body.tools ?? [],
    max_output_tokens: maxTokens, max_tool_calls: null, previous_response_id: body.previous_response_id ?? null, prompt: null,
    reasoning: body.reasoning ?? null, service_tier: body.service_tier ?? "auto", store: storeIt,
    text: body.text ?? { format: { type: "text" } }, top_logprobs: body.top_logprobs ?? 0, truncation: body.truncation ?? "disabled",
    user: body.user ?? null, prompt_cache_key: body.prompt_cache_key ?? null, safety_identifier: body.safety_identifier ?? null,
  };
  return {
    // the images' embeddings at their placeholder rows (prepareChatGeneration placed them)
    request: generation.multimodal === undefined ? request : { ...request, multimodal: generation.multimodal },
    answer: {
      id, createdAt: unixSeconds(arrivalMs), model: loraName ?? options.servedModelName,
      tokenizer: logprobTokenizer(options.orchestrator.tokenizer, options.returnTokensAsTokenIds ?? false),
      outputConfig: generation.output, topLogprobs: logprobs ? (body.top_logprobs ?? 0) : null, namespaced, echo,
      inputMessages: messages, enableResponseMessages: body.enable_response_messages === true, enablePerRequestMetrics: options.enablePerRequestMetrics, store: storeIt, background,
    },
  };
}
