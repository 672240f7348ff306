/**
 * The two Hub endpoints fennec uses, as huggingface_hub calls them:
 *   GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true  the commit and every file with its size and LFS
 *       SHA-256 (hf_api.py: model_info with files_metadata=True)
 *   GET {endpoint}/{repo}/resolve/{commit}/{file}                    the bytes, redirects followed, `Range: bytes=N-`
 *       to resume (file_download.py: http_get with resume_size)
 * Errors carry the Hub's X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo) in words.
 * @example const info = await repoInfo(settings, "Qwen/Qwen3-0.6B-GGUF", "main");
 */
import { createHash, type Hash } from "node:crypto";
import { closeSync, ftruncateSync, mkdirSync, openSync, readSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { HubSettings } from "./hub-settings.ts";
import { errorMessage } from "../util/error-message.ts";

/** `network`: the Hub could not be reached (the caller may fall back to the cache); the rest are final answers */
export type HubErrorKind = "network" | "not-found" | "unauthorized" | "corrupt" | "http";

export class HubError extends Error {
  constructor(readonly kind: HubErrorKind, message: string) {
    super(message);
  }
}

export interface RepoFile {
  /** path inside the repository */
  readonly path: string;
  readonly size: number;
  /** the LFS SHA-256 (every GGUF on the Hub is an LFS file); null for a small git file */
  readonly sha256: string | null;
}

export interface RepoInfo {
  readonly commit: string;
  readonly files: readonly RepoFile[];
}

function headers(settings: HubSettings, extra: Record<string, string> = {}): Record<string, string> {
  return { "user-agent": "fennec (huggingface_hub-compatible)", ...(settings.token !== null ? { authorization: `Bearer ${settings.token}` } : {}), ...extra };
}

/** fetch, with a network failure or a timeout turned into a HubError of kind "network" */
async function hubFetch(url: string, init: RequestInit, timeoutMs: number, what: string): Promise<Response> {
  try {
    return await fetch(url, { ...init, redirect: "follow", signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    const cause = e instanceof Error && e.name === "TimeoutError" ? `no answer in ${timeoutMs / 1000} s` : errorMessage(e);
    throw new HubError("network", `cannot reach the Hugging Face Hub at ${new URL(url).origin} for ${what} (${cause}); check the network, or set HF_HUB_OFFLINE=1 to use only the cache`);
  }
}

/** A non-2xx answer in words, as huggingface_hub's hf_raise_for_status reads X-Error-Code. */
function answerError(response: Response, repo: string, what: string): HubError {
  const code = response.headers.get("x-error-code") ?? "";
  const hubMessage = response.headers.get("x-error-message");
  const said = hubMessage !== null ? ` (the Hub says: ${hubMessage})` : "";
  if (code === "RepoNotFound" || (response.status === 401 && code === "")) {
    return new HubError("not-found", `repository ${repo} not found on the Hugging Face Hub${said}; check the name, or set HF_TOKEN if it is private`);
  }
  if (code === "RevisionNotFound") return new HubError("not-found", `${what}: revision not found in ${repo}${said}; check --revision`);
  if (code === "EntryNotFound" || response.status === 404) return new HubError("not-found", `${what} not found in ${repo}${said}`);
  if (code === "GatedRepo" || response.status === 403 || response.status === 401) {
    return new HubError("unauthorized", `${repo} is gated or private and the token was refused (HTTP ${response.status})${said}: accept its license on the Hub and set HF_TOKEN`);
  }
  return new HubError("http", `the Hugging Face Hub answered HTTP ${response.status} for ${what} of ${repo}${said}`);
}

export async function repoInfo(settings: HubSettings, repo: string, revision: string): Promise<RepoInfo> {
  const url = `${settings.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`;
  const response = await hubFetch(url, { headers: headers(settings) }, settings.metadataTimeoutMs, `the file list of ${repo}`);
  if (!response.ok) throw answerError(response, repo, `revision ${revision}`);
  let body: { sha?: unknown; siblings?: unknown };
  try {
    body = (await response.json()) as typeof body;
  } catch (e) {
    throw new HubError("http", `the Hub's file list of ${repo} is not JSON (${errorMessage(e)})`);
  }
  if (typeof body.sha !== "string" || !Array.isArray(body.siblings)) throw new HubError("http", `the Hub's file list of ${repo} has no "sha" and "siblings"`);
  const files = body.siblings.flatMap((s: { rfilename?: unknown; size?: unknown; lfs?: { sha256?: unknown; size?: unknown } }): RepoFile[] => {
    if (typeof s.rfilename !== "string") return [];
    const sha256 = typeof s.lfs?.sha256 === "string" ? s.lfs.sha256 : null;
    const size = typeof s.lfs?.size === "number" ? s.lfs.size : typeof s.size === "number" ? s.size : -1;
    return [{ path: s.rfilename, size, sha256 }];
  });
  return { commit: body.sha, files };
}

export interface DownloadProgress {
  update(doneBytes: number, totalBytes: number): void;
}

/** the SHA-256 of the first `length` bytes already on disk, so a resumed download is still checked whole */
function hashExisting(path: string, length: number): Hash {
  const hash = createHash("sha256");
  const fd = openSync(path, "r");
  try {
    const chunk = new Uint8Array(1 << 20);
    for (let at = 0; at < length;) {
      const n = readSync(fd, chunk, 0, Math.min(chunk.length, length - at), at);
      if (n <= 0) break;
      hash.update(chunk.subarray(0, n));
      at += n;
    }
  } finally {
    closeSync(fd);
  }
  return hash;
}

function fileLength(path: string): number {
  try { return statSync(path).size; } catch { return 0; }
}

/**
 * Downloads `file` at `commit` into `partialPath`, resuming from what is there, and checks its size and SHA-256.
 * Returns the number of bytes that were already there (0 for a fresh download). On a hash mismatch the partial file
 * is deleted (its bytes cannot be trusted); on a dropped connection it is kept for the next run.
 */
export async function downloadFile(
  settings: HubSettings, repo: string, commit: string, file: RepoFile, partialPath: string, progress: DownloadProgress,
): Promise<number> {
  mkdirSync(dirname(partialPath), { recursive: true });
  let resumeFrom = fileLength(partialPath);
  if (file.size >= 0 && resumeFrom > file.size) resumeFrom = 0; // not this file's bytes
  const fd = openSync(partialPath, resumeFrom === 0 ? "w" : "r+");
  let hash: Hash;
  let done = resumeFrom;
  try {
    hash = resumeFrom > 0 ? hashExisting(partialPath, resumeFrom) : createHash("sha256");
    if (file.size < 0 || done < file.size) {
      const url = `${settings.endpoint}/${repo}/resolve/${commit}/${file.path.split("/").map(encodeURIComponent).join("/")}`;
      const controller = new AbortController();
      let idle: ReturnType<typeof setTimeout> | undefined;
      const arm = (): void => {
        clearTimeout(idle);
        idle = setTimeout(() => controller.abort(), settings.downloadTimeoutMs);
      };
      arm();
      let response: Response;
      try {
        response = await fetch(url, { headers: headers(settings, done > 0 ? { range: `bytes=${done}-` } : {}), redirect: "follow", signal: controller.signal });
      } catch (e) {
        clearTimeout(idle);
        throw new HubError("network", `cannot reach the Hugging Face Hub at ${settings.endpoint} to download ${file.path} (${controller.signal.aborted ? `no answer in ${settings.downloadTimeoutMs / 1000} s` : errorMessage(e)}); run the same command again to resume`);
      }
      if (!response.ok) {
        clearTimeout(idle);
        throw answerError(response, repo, file.path);
      }
      if (done > 0 && response.status !== 206) {
        // the server ignored the range: start over (huggingface_hub does the same)
        done = 0;
        hash = createHash("sha256");
        ftruncateSync(fd, 0);
      }
      const reader = response.body!.getReader();
      try {
        for (;;) {
          const { done: finished, value } = await reader.read();
          if (finished) break;
          arm();
          writeSync(fd, value, 0, value.byteLength, done);
          hash.update(value);
          done += value.byteLength;
          progress.update(done, file.size);
        }
      } catch (e) {
        throw new HubError("network", `the download of ${file.path} stopped at ${done} of ${file.size} bytes (${controller.signal.aborted ? `nothing received for ${settings.downloadTimeoutMs / 1000} s` : errorMessage(e)}); run the same command again to resume`);
      } finally {
        clearTimeout(idle);
      }
    }
  } finally {
    closeSync(fd);
  }
  if (file.size >= 0 && done !== file.size) {
    throw new HubError("network", `the download of ${file.path} ended at ${done} of ${file.size} bytes; run the same command again to resume`);
  }
  const actual = hash.digest("hex");
  if (file.sha256 !== null && actual !== file.sha256) {
    rmSync(partialPath, { force: true });
    throw new HubError("corrupt", `${file.path} from ${repo} is corrupted: its SHA-256 is ${actual}, the Hub says ${file.sha256}; the partial file was deleted, run the same command again`);
  }
  return resumeFrom;
}
