/**
 * `chat`'s flags as one typed config (vLLM's `vllm chat`): a server (--url) or an in-process engine on the model, the
 * sampling fields sent only when given, the system prompt. `env` supplies OPENAI_API_KEY, as vLLM's client reads it.
 */
import { ok, type Result } from "../util/result.ts";
import { inProcessEngineConfig, type InProcessEngineConfig } from "./in-process-engine-config.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

/** the sampling fields of every request; null: not sent (the server's default) */
export interface ChatSampling {
  readonly maxTokens: number | null;
  readonly temperature: number | null;
  readonly topP: number | null;
  readonly topK: number | null;
}

export interface ChatConfig {
  /** --url: the API base of a server; null: an in-process engine (`local`) */
  readonly url: string | null;
  /** --model-name sent to --url; null: the first of its /models */
  readonly modelName: string | null;
  /** --api-key, else $OPENAI_API_KEY; null: none */
  readonly apiKey: string | null;
  readonly systemPrompt: string | null;
  readonly sampling: ChatSampling;
  /** the in-process engine when there is no --url; null with --url */
  readonly local: InProcessEngineConfig | null;
}

export function chatConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<ChatConfig> {
  const num = (v: Options[string] | undefined): number | null => (typeof v === "number" ? v : null);
  const url = stringOrNull(options.url);
  const local = url === null ? inProcessEngineConfig(options, env) : null;
  if (local !== null && !local.ok) return local;
  return ok({
    url, modelName: stringOrNull(options["model-name"]), apiKey: stringOrNull(options["api-key"]) ?? env.OPENAI_API_KEY ?? null,
    systemPrompt: stringOrNull(options["system-prompt"]),
    sampling: { maxTokens: num(options["max-tokens"]), temperature: num(options.temperature), topP: num(options["top-p"]), topK: num(options["top-k"]) },
    local: local === null ? null : local.value,
  });
}
