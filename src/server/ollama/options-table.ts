/**
 * Ollama's `options` (ollama api/types.go Options + Runner, DefaultOptions) mapped onto fennec's sampling: one row per
 * key with Ollama's default and where it lands. Ollama runs llama.cpp's sampler chain, so every request gets
 * SamplingParams.llama (engine/llama-sampler-chain.ts) with Ollama's defaults where they differ from llama.cpp's
 * (temperature 0.8, top_p 0.9, repeat_penalty 1.0). The runner keys (num_ctx, num_batch, num_gpu, ...) are fixed when
 * fennec starts: num_ctx is honoured as a per-request limit up to --max-model-len; the others are accepted only at
 * their automatic value, never ignored. Ollama logs and drops unknown keys; fennec refuses them (a silently dropped
 * option changes the answer). The server's --generation-config sits between Ollama's defaults and the request, as a
 * Modelfile's PARAMETERs do (modelParameters). Framework-free; throws ApiError (400) with Ollama's `option "x" must be of type ...`.
 * @example ollamaSampling({ temperature: 0 }).vllm.temperature // 0
 */
import { DEFAULT_LLAMA_SAMPLING_PARAMS, type LlamaSamplingParams } from "../../engine/sampling-params.ts";
import { ApiError } from "../errors.ts";

type OptionType = "integer" | "number" | "boolean" | "string[]";
type OptionValue = number | boolean | readonly string[];

/** Where a key goes: a vLLM body field, a llama.cpp chain field, the request's limits, or nowhere but its default. */
type Target =
  | { readonly vllm: "temperature" | "top_p" | "top_k" | "min_p" | "presence_penalty" | "frequency_penalty" | "repetition_penalty" | "seed" | "stop" }
  | { readonly llama: "typicalP" | "repeatLastN" | "mirostat" | "mirostatTau" | "mirostatEta" }
  | { readonly limit: "numPredict" | "numCtx" }
  /** a runner setting fennec fixes at start: only the automatic value (`default`) is accepted */
  | { readonly fixed: string };

interface OptionRow {
  readonly type: OptionType;
  /** Ollama's default (DefaultOptions); null = unset (the limit or fennec's own) */
  readonly default: OptionValue | null;
  readonly target: Target;
}

/** The table: Ollama's key -> type, Ollama's default, fennec's field. */
export const OLLAMA_OPTIONS: Readonly<Record<string, OptionRow>> = {
  num_predict: { type: "integer", default: -1, target: { limit: "numPredict" } },
  num_ctx: { type: "integer", default: null, target: { limit: "numCtx" } },
  temperature: { type: "number", default: 0.8, target: { vllm: "temperature" } },
  top_k: { type: "integer", default: 40, target: { vllm: "top_k" } },
  top_p: { type: "number", default: 0.9, target: { vllm: "top_p" } },
  min_p: { type: "number", default: 0, target: { vllm: "min_p" } },
  typical_p: { type: "number", default: 1, target: { llama: "typicalP" } },
  repeat_last_n: { type: "integer", default: 64, target: { llama: "repeatLastN" } },
  repeat_penalty: { type: "number", default: 1, target: { vllm: "repetition_penalty" } },
  presence_penalty: { type: "number", default: 0, target: { vllm: "presence_penalty" } },
  frequency_penalty: { type: "number", default: 0, target: { vllm: "frequency_penalty" } },
  mirostat: { type: "integer", default: 0, target: { llama: "mirostat" } },
  mirostat_tau: { type: "number", default: 5, target: { llama: "mirostatTau" } },
  mirostat_eta: { type: "number", default: 0.1, target: { llama: "mirostatEta" } },
  seed: { type: "integer", default: -1, target: { vllm: "seed" } },
  stop: { type: "string[]", default: [], target: { vllm: "stop" } },
  num_keep: { type: "integer", default: 4, target: { fixed: "fennec never shifts the context, so there is nothing to keep" } },
  num_batch: { type: "integer", default: 512, target: { fixed: "the batch size is --max-num-batched-tokens, set when fennec starts" } },
  num_gpu: { type: "integer", default: -1, target: { fixed: "fennec runs on the CPU" } },
  main_gpu: { type: "integer", default: 0, target: { fixed: "fennec runs on the CPU" } },
  num_thread: { type: "integer", default: 0, target: { fixed: "the thread count is set when fennec starts" } },
  use_mmap: { type: "boolean", default: true, target: { fixed: "fennec maps the model file when it starts" } },
};

/**
 * The server's --generation-config defaults as Ollama options: the layer between Ollama's defaults and the request's
 * (Ollama's Modelfile PARAMETERs; vLLM's default_sampling_params), key by key.
 */
const GENERATION_CONFIG_OPTIONS: Readonly<Record<string, string>> = {
  temperature: "temperature", top_p: "top_p", top_k: "top_k", min_p: "min_p", repetition_penalty: "repeat_penalty", max_new_tokens: "num_predict",
};

/** --generation-config's values under Ollama's option names (what /api/show lists as `parameters`). */
export function modelParameters(generationDefaults: Readonly<Record<string, number>> | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(generationDefaults ?? {})) {
    const option = GENERATION_CONFIG_OPTIONS[key];
    if (option !== undefined) out[option] = value;
  }
  return out;
}

/** What a request's options come to. */
export interface OllamaSampling {
  /** vLLM's field names, for toSamplingParams (through prepare-generation.ts) */
  readonly vllm: Readonly<Record<string, number | readonly string[] | null>>;
  readonly llama: LlamaSamplingParams;
  /** num_predict: null = up to the context (Ollama's -1 and -2) */
  readonly maxTokens: number | null;
  /** num_ctx: prompt plus output must fit in it; null = --max-model-len */
  readonly numCtx: number | null;
}

function checkType(key: string, type: OptionType, value: unknown): OptionValue {
  const ok = type === "integer" ? Number.isInteger(value)
    : type === "number" ? typeof value === "number" && Number.isFinite(value)
    : type === "boolean" ? typeof value === "boolean"
    : Array.isArray(value) && value.every((v) => typeof v === "string");
  const words = { integer: "integer", number: "float", boolean: "bool", "string[]": "array of strings" } as const;
  if (!ok) throw new ApiError("badRequest", `option "${key}" must be of type ${words[type]}`);
  return value as OptionValue;
}

/**
 * A request's `options` over Ollama's defaults. `options` is what the client sent (null/absent = none).
 * @example ollamaSampling({ num_predict: 8, stop: ["\n"] }).maxTokens // 8
 */
export function ollamaSampling(options: unknown, modelDefaults: Readonly<Record<string, number>> = {}): OllamaSampling {
  if (options !== undefined && options !== null && (typeof options !== "object" || Array.isArray(options))) {
    throw new ApiError("badRequest", "options must be an object");
  }
  const given = (options ?? {}) as Record<string, unknown>;
  const vllm: Record<string, number | readonly string[] | null> = {};
  const llama: { -readonly [K in keyof LlamaSamplingParams]: LlamaSamplingParams[K] } = { ...DEFAULT_LLAMA_SAMPLING_PARAMS };
  const limits: { numPredict: number | null; numCtx: number | null } = { numPredict: null, numCtx: null };
  for (const key of Object.keys(given)) {
    if (!(key in OLLAMA_OPTIONS)) throw new ApiError("badRequest", `invalid option provided: "${key}" is not one of Ollama's options that fennec implements (${Object.keys(OLLAMA_OPTIONS).join(", ")})`);
  }
  for (const [key, row] of Object.entries(OLLAMA_OPTIONS)) {
    const raw = given[key];
    const value = raw === undefined || raw === null ? (modelDefaults[key] ?? row.default) : checkType(key, row.type, raw);
    const target = row.target;
    if ("vllm" in target) {
      // Ollama's seed -1 (and any negative) means a random seed
      vllm[target.vllm] = target.vllm === "seed" && typeof value === "number" && value < 0 ? null : (value as number | readonly string[] | null);
    } else if ("llama" in target) {
      if (target.llama === "mirostat" && value !== 0 && value !== 1 && value !== 2) throw new ApiError("badRequest", `option "mirostat" must be 0, 1 or 2, got ${String(value)}`);
      (llama as Record<string, unknown>)[target.llama] = value;
    } else if ("limit" in target) {
      if (value === null) continue;
      const n = value as number;
      if (target.limit === "numPredict") {
        // Ollama: -1 = no limit, -2 = fill the context; both are "up to the context" here
        if (n === 0 || n < -2) throw new ApiError("badRequest", `option "num_predict" must be positive, -1 (no limit) or -2 (fill the context), got ${n}`);
        limits.numPredict = n > 0 ? n : null;
      } else {
        if (n < 1) throw new ApiError("badRequest", `option "num_ctx" must be positive, got ${n}`);
        limits.numCtx = n;
      }
    } else if (raw !== undefined && raw !== null && raw !== row.default && !(key === "num_gpu" && raw === 0)) {
      throw new ApiError("badRequest", `option "${key}" cannot be changed per request: ${target.fixed} (send ${JSON.stringify(row.default)} or leave it out)`);
    }
  }
  return { vllm, llama, maxTokens: limits.numPredict, numCtx: limits.numCtx };
}
