/**
 * serve's media flags as one MediaSettings record: --mmproj / --no-mmproj (llama.cpp), --allowed-media-domains,
 * --allowed-local-media-path and --limit-mm-per-prompt (vLLM's JSON form, {"image": N} or {"image": {"count": N}};
 * other modalities are refused: fennec takes images only), VLLM_IMAGE_FETCH_TIMEOUT (vLLM envs.py).
 */
import { resolve } from "node:path";
import { DEFAULT_MEDIA_SETTINGS, type MediaSettings } from "../config/media-settings.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";

function imageLimit(raw: string | null): Result<number> {
  if (raw === null) return ok(DEFAULT_MEDIA_SETTINGS.maxImagesPerPrompt);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return err(`--limit-mm-per-prompt must be a JSON object such as '{"image": 2}', got ${raw}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return err(`--limit-mm-per-prompt must be a JSON object such as '{"image": 2}', got ${raw}`);
  let limit = DEFAULT_MEDIA_SETTINGS.maxImagesPerPrompt;
  for (const [modality, value] of Object.entries(parsed)) {
    const count = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)["count"] : value;
    if (!Number.isInteger(count) || (count as number) < 0) return err(`--limit-mm-per-prompt: the ${modality} limit must be a non-negative integer, got ${JSON.stringify(value)}`);
    if (modality === "image") limit = count as number;
    else if (count !== 0) return err(`--limit-mm-per-prompt: fennec takes images only, not ${modality} (give "${modality}": 0 or leave it out)`);
  }
  return ok(limit);
}

/** The media settings of serve, or one line naming the bad flag. */
export function mediaFlags(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<MediaSettings> {
  const limit = imageLimit(stringOrNull(options["limit-mm-per-prompt"]));
  if (!limit.ok) return limit;
  const domains = options["allowed-media-domains"];
  const local = stringOrNull(options["allowed-local-media-path"]);
  const timeoutText = env["VLLM_IMAGE_FETCH_TIMEOUT"];
  const fetchTimeoutS = timeoutText === undefined || timeoutText === "" ? DEFAULT_MEDIA_SETTINGS.fetchTimeoutS : Number(timeoutText);
  if (!(fetchTimeoutS > 0)) return err(`VLLM_IMAGE_FETCH_TIMEOUT must be a positive number of seconds, got ${timeoutText}`);
  const mmproj = stringOrNull(options["mmproj"]);
  if (mmproj !== null && options["no-mmproj"] === true) return err("--mmproj and --no-mmproj contradict each other: give one");
  return ok({
    ...DEFAULT_MEDIA_SETTINGS,
    mmproj,
    noMmproj: options["no-mmproj"] === true,
    allowedMediaDomains: Array.isArray(domains) ? domains.map(String) : null,
    allowedLocalMediaPath: local === null ? null : resolve(local),
    maxImagesPerPrompt: limit.value,
    fetchTimeoutS,
    ...(typeof options["mm-processor-cache-gb"] === "number" ? { encoderCacheBytes: Math.round(options["mm-processor-cache-gb"] * 2 ** 30) } : {}),
  });
}
