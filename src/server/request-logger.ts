/**
 * --enable-log-requests: one INFO line per request the engine receives, as vLLM's RequestLogger.log_inputs
 * (vllm/entrypoints/logger.py) writes it: `Received request <id>: prompt: '<text>', params: SamplingParams(...),
 * prompt_token_ids: [...], lora_request: None.` The prompt and its ids are cut to --max-log-len, as in vLLM. A request
 * run with a LoRA adapter shows its LoRARequest (vllm/lora/request.py, a msgspec Struct: its repr lists every field).
 * Wraps the orchestrator, so every route (chat, completions, /invocations, each prompt of a list) is logged once.
 * With --enable-log-outputs also each finished choice, as RequestLogger.log_outputs: `Generated response <id>:
 * output: '<text>', output_token_ids: [...], finish_reason: stop` (cut to --max-log-len too).
 * @example orchestrator = withRequestLogging(orchestrator, (line) => log.info(line), null);
 */
import type { SamplingParams } from "../engine/sampling-params.ts";
import type { Orchestrator } from "../frontend/orchestrator.ts";
import type { LoraAdapterCard } from "./lora-routes.ts";

const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Python's repr of a value, close enough for a log line (None, True, 'text', [1, 2]). */
function pyRepr(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "string") return `'${value.replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\n/g, "\\n")}'`;
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(", ")}]`;
  if (typeof value === "object") return `{${Object.entries(value).map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(", ")}}`;
  return String(value);
}

export function samplingParamsRepr(params: SamplingParams): string {
  return `SamplingParams(${Object.entries(params).map(([k, v]) => `${snake(k)}=${pyRepr(v)}`).join(", ")})`;
}

/** vLLM's LoRARequest repr, field by field in its declaration order */
export function loraRequestRepr(card: LoraAdapterCard): string {
  return `LoRARequest(lora_name=${pyRepr(card.name)}, lora_int_id=${card.id}, lora_path=${pyRepr(card.path)}, base_model_name=${pyRepr(card.baseModelName)}, tensorizer_config_dict=None, load_inplace=${pyRepr(card.loadInplace)})`;
}

/** `loraOf`: the served adapter of a name (lora-routes.ts LoraAdapters.card), for the line's lora_request */
export function withRequestLogging(inner: Orchestrator, log: (line: string) => void, maxLogLen: number | null, logOutputs = false, loraOf: (name: string) => LoraAdapterCard | null = () => null): Orchestrator {
  const cut = <T extends string | readonly number[]>(v: T): T => (maxLogLen === null ? v : (v.slice(0, maxLogLen) as T));
  const generate: Orchestrator["generate"] = (request, signal) => {
    const prompt = inner.tokenizer.decode(request.promptTokenIds);
    const card = request.loraName === undefined ? null : loraOf(request.loraName);
    log(`Received request ${request.externalRequestId ?? request.requestId}: prompt: ${pyRepr(cut(prompt))}, params: ${samplingParamsRepr(request.sampling)}, ` +
      `prompt_token_ids: ${pyRepr(cut(request.promptTokenIds))}, lora_request: ${card === null ? "None" : loraRequestRepr(card)}.`);
    return logOutputs ? loggedOutputs(inner.generate(request, signal), request.externalRequestId ?? request.requestId) : inner.generate(request, signal);
  };
  /** the stream as it is, plus one line per choice when it finishes */
  async function* loggedOutputs(outputs: ReturnType<Orchestrator["generate"]>, id: string): ReturnType<Orchestrator["generate"]> {
    const texts = new Map<number, { text: string; ids: number[] }>();
    for await (const out of outputs) {
      for (const o of out.outputs) {
        const seen = texts.get(o.index) ?? { text: "", ids: [] };
        seen.text += o.textDelta;
        seen.ids.push(...o.tokenIdsDelta);
        texts.set(o.index, seen);
        if (o.finishReason !== null) log(`Generated response ${id}${o.index > 0 ? `-${o.index}` : ""}: output: ${pyRepr(cut(seen.text))}, output_token_ids: ${pyRepr(cut(seen.ids))}, finish_reason: ${o.finishReason}`);
      }
      yield out;
    }
  }
  // vLLM logs a pooling request the same way, with its PoolingParams (vllm/pooling_params.py __repr__)
  const encode: NonNullable<Orchestrator["encode"]> = (request, signal) => {
    const prompt = inner.tokenizer.decode(request.promptTokenIds);
    const params = `PoolingParams(task=embed, normalize=${pyRepr(request.pooling.normalize)}, dimensions=${pyRepr(request.pooling.dimensions)}, use_activation=None, step_tag_id=None, returned_token_ids=None, requires_token_ids=False, skip_reading_prefix_cache=False, truncate_prompt_tokens=None, extra_kwargs=None)`;
    log(`Received request ${request.externalRequestId ?? request.requestId}: prompt: ${pyRepr(cut(prompt))}, params: ${params}, prompt_token_ids: ${pyRepr(cut(request.promptTokenIds))}, lora_request: None.`);
    return inner.encode!(request, signal);
  };
  // a proxy, so every other member of the orchestrator (now and later) is the inner one's
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === "generate") return generate;
      if (prop === "encode" && target.encode !== undefined) return encode;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
