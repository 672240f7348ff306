/**
 * What the server fills into a generation body before its route reads it, as vLLM's serving layer does:
 * - `model` naming any of the --served-model-name aliases becomes the first name (vLLM answers with it);
 * - sampling fields the request omits take the server's defaults (--generation-config / --override-generation-config,
 *   vLLM's default_sampling_params: temperature, top_p, top_k, min_p, repetition_penalty, and max_new_tokens as
 *   max_tokens when neither max_tokens nor max_completion_tokens is given).
 * @example applyRequestDefaults("/v1/chat/completions", body, { names: ["a", "b"], sampling: { temperature: 0.5 } });
 */

/** vLLM's generation-config keys -> the wire field they default. */
export const GENERATION_DEFAULT_FIELDS = {
  temperature: "temperature",
  top_p: "top_p",
  top_k: "top_k",
  min_p: "min_p",
  repetition_penalty: "repetition_penalty",
  max_new_tokens: "max_tokens",
} as const;
export type GenerationDefaults = Partial<Record<keyof typeof GENERATION_DEFAULT_FIELDS, number>>;

export interface RequestDefaults {
  /** every served model name, the first being the one answers carry */
  readonly names: readonly string[];
  readonly sampling: GenerationDefaults;
}

const GENERATION_PATHS = new Set(["/v1/chat/completions", "/v1/completions", "/v1/messages"]);

export function applyRequestDefaults(pathname: string, body: Record<string, unknown>, defaults: RequestDefaults): void {
  const [primary, ...aliases] = defaults.names;
  if (primary !== undefined && typeof body.model === "string" && aliases.includes(body.model)) body.model = primary;
  if (!GENERATION_PATHS.has(pathname)) return;
  for (const [key, field] of Object.entries(GENERATION_DEFAULT_FIELDS) as [keyof GenerationDefaults, string][]) {
    const value = defaults.sampling[key];
    if (value === undefined) continue;
    if (field === "max_tokens" && (body.max_tokens != null || body.max_completion_tokens != null)) continue;
    if (body[field] === undefined || body[field] === null) body[field] = value;
  }
}
