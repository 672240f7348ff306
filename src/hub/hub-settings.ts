/**
 * Where the Hub is and where its files are cached, from the environment variables huggingface_hub reads
 * (huggingface_hub/constants.py), so a cache shared with vLLM, transformers or `hf download` is reused as it is:
 *   HF_ENDPOINT     the Hub's address (default https://huggingface.co)
 *   HF_HOME         default $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
 *   HF_HUB_CACHE    default $HF_HOME/hub (the legacy HUGGINGFACE_HUB_CACHE too); vLLM's --download-dir overrides it
 *   HF_TOKEN        a bearer token, else the file $HF_TOKEN_PATH (default $HF_HOME/token) as `hf auth login` writes it
 *   HF_HUB_OFFLINE  1/ON/YES/TRUE: never touch the network, serve from the cache
 *   HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT  seconds to wait for metadata / for the next bytes (default 10 each)
 * @example const settings = hubSettings(process.env, null);
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export interface HubSettings {
  readonly endpoint: string;
  readonly cacheDir: string;
  readonly token: string | null;
  readonly offline: boolean;
  readonly metadataTimeoutMs: number;
  /** a download that receives nothing for this long is stopped (and resumed by the next run) */
  readonly downloadTimeoutMs: number;
}

type Env = Readonly<Record<string, string | undefined>>;

/** huggingface_hub's _is_true */
function isTrue(value: string | undefined): boolean {
  return value !== undefined && ["1", "ON", "YES", "TRUE"].includes(value.trim().toUpperCase());
}

/** huggingface_hub's DEFAULT_ETAG_TIMEOUT / DEFAULT_DOWNLOAD_TIMEOUT: 10 s */
function seconds(value: string | undefined): number {
  const n = Number(value);
  return value !== undefined && value.trim() !== "" && Number.isFinite(n) && n > 0 ? n : 10;
}

export function hubSettings(env: Env, downloadDir: string | null): HubSettings {
  const home = env["HF_HOME"] || join(env["XDG_CACHE_HOME"] || join(homedir(), ".cache"), "huggingface");
  const cacheDir = downloadDir ?? (env["HF_HUB_CACHE"] || env["HUGGINGFACE_HUB_CACHE"] || join(home, "hub"));
  let token = env["HF_TOKEN"] || env["HUGGING_FACE_HUB_TOKEN"] || null;
  if (token === null) {
    try {
      token = readFileSync(env["HF_TOKEN_PATH"] || join(home, "token"), "utf8").trim() || null;
    } catch {
      token = null;
    }
  }
  return {
    endpoint: (env["HF_ENDPOINT"] || "https://huggingface.co").replace(/\/+$/, ""),
    cacheDir,
    token,
    offline: isTrue(env["HF_HUB_OFFLINE"]),
    metadataTimeoutMs: seconds(env["HF_HUB_ETAG_TIMEOUT"]) * 1000,
    downloadTimeoutMs: seconds(env["HF_HUB_DOWNLOAD_TIMEOUT"]) * 1000,
  };
}
