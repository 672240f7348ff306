/**
 * A Hub model reference to a local GGUF path: from the cache when it is there, else downloaded into it (resumed,
 * size- and SHA-256-checked), as huggingface_hub's hf_hub_download does for each file. Offline (HF_HUB_OFFLINE) only
 * the cache is read; when the Hub cannot be reached a cached copy is used, as huggingface_hub falls back to it.
 * Split models fetch every part; the path returned is the first part's (the loader finds the others beside it).
 * Failures throw a HubError whose kind tells a wrong name ("not-found") from a failed network ("network").
 * @example const path = await fetchHubModel(ref, { revision: "main", settings, log, progressBar });
 */
import { existsSync, statSync } from "node:fs";
import { downloadFile, HubError, repoInfo, type DownloadProgress, type RepoFile } from "./hub-client.ts";
import { repoCache, type RepoCache } from "./hub-cache.ts";
import type { HubSettings } from "./hub-settings.ts";
import { pickGgufFiles, type ModelReference } from "./model-reference.ts";

export interface FetchOptions {
  readonly revision: string;
  readonly settings: HubSettings;
  /** one line per event (what is fetched, resumed, found in the cache) */
  readonly log: (line: string) => void;
  /** a progress bar for one file's bytes (drawn only on a terminal) */
  readonly progressBar: (label: string) => DownloadProgress & { done(): void };
}

export interface FetchedModel {
  /** the first (or only) file, in the cache's snapshots folder */
  readonly path: string;
  readonly files: readonly string[];
  readonly commit: string;
  /** bytes downloaded by this call (0: everything came from the cache) */
  readonly downloadedBytes: number;
}

const MIB = 1024 * 1024;
const mib = (bytes: number): string => `${(bytes / MIB).toFixed(1)} MiB`;

function isComplete(path: string, size: number): boolean {
  try {
    return statSync(path).isFile() && (size < 0 || statSync(path).size === size);
  } catch {
    return false;
  }
}

/** the files `ref` names in a cached snapshot, when all of them are there */
function fromCache(ref: ModelReference, cache: RepoCache, revision: string): FetchedModel | null {
  const commit = cache.commitOf(revision);
  if (commit === null) return null;
  const picked = pickGgufFiles(ref, cache.snapshotFiles(commit));
  if (!picked.ok) return null;
  const paths = picked.value.files.map((f) => cache.snapshotFile(commit, f));
  if (!paths.every((p) => existsSync(p))) return null;
  return { path: paths[0]!, files: picked.value.files, commit, downloadedBytes: 0 };
}

export async function fetchHubModel(ref: ModelReference, options: FetchOptions): Promise<FetchedModel> {
  const { settings, revision, log } = options;
  const cache = repoCache(settings.cacheDir, ref.repo);
  const name = `${ref.repo}${ref.file !== null ? `/${ref.file}` : ref.tag !== null ? `:${ref.tag}` : ""}`;
  if (settings.offline) {
    const cached = fromCache(ref, cache, revision);
    if (cached === null) throw new HubError("not-found", `HF_HUB_OFFLINE is set and ${name} (revision ${revision}) is not in the Hugging Face cache at ${settings.cacheDir}: run \`fennec pull ${name}\` with network access first, or unset HF_HUB_OFFLINE`);
    log(`using ${cached.files.join(", ")} of ${ref.repo} from the cache (offline, commit ${cached.commit.slice(0, 12)})`);
    return cached;
  }
  let info;
  try {
    info = await repoInfo(settings, ref.repo, revision);
  } catch (e) {
    const cached = e instanceof HubError && e.kind === "network" ? fromCache(ref, cache, revision) : null;
    if (cached === null) throw e;
    log(`${(e as HubError).message.split(";")[0]}: using ${cached.files.join(", ")} of ${ref.repo} from the cache (commit ${cached.commit.slice(0, 12)})`);
    return cached;
  }
  const picked = pickGgufFiles(ref, info.files.map((f) => f.path));
  if (!picked.ok) throw new HubError("not-found", picked.error);
  let downloadedBytes = 0;
  for (const path of picked.value.files) {
    downloadedBytes += await fetchOne(ref.repo, info.commit, info.files.find((f) => f.path === path)!, cache, options, picked.value.reason);
  }
  cache.writeRef(revision, info.commit);
  return { path: cache.snapshotFile(info.commit, picked.value.files[0]!), files: picked.value.files, commit: info.commit, downloadedBytes };
}

/** one file into the cache; the bytes downloaded */
async function fetchOne(repo: string, commit: string, file: RepoFile, cache: RepoCache, options: FetchOptions, reason: string): Promise<number> {
  const snapshot = cache.snapshotFile(commit, file.path);
  if (isComplete(snapshot, file.size)) {
    options.log(`${file.path} of ${repo} is in the cache (commit ${commit.slice(0, 12)}): ${snapshot}`);
    return 0;
  }
  if (file.sha256 === null) throw new HubError("http", `${file.path} of ${repo} has no LFS SHA-256 on the Hub, so its download cannot be checked: fennec downloads GGUF files stored with Git LFS`);
  if (isComplete(cache.blob(file.sha256), file.size)) {
    // the same bytes under another revision: link them, download nothing
    cache.commitBlob(file.sha256, commit, file.path);
    options.log(`${file.path} of ${repo} is in the cache under another revision: linked at commit ${commit.slice(0, 12)}`);
    return 0;
  }
  const partial = cache.incomplete(file.sha256);
  const started = performance.now();
  const bar = options.progressBar(`downloading ${file.path.split("/").pop()}`);
  let resumedFrom: number;
  try {
    const already = existsSync(partial) ? statSync(partial).size : 0;
    options.log(already > 0 && already < file.size
      ? `resuming ${file.path} of ${repo} at ${mib(already)} of ${mib(file.size)} (${reason}), commit ${commit.slice(0, 12)}, from ${options.settings.endpoint}`
      : `downloading ${file.path} of ${repo} (${mib(file.size)}, ${reason}), commit ${commit.slice(0, 12)}, from ${options.settings.endpoint}`);
    resumedFrom = await downloadFile(options.settings, repo, commit, file, partial, bar);
  } finally {
    bar.done();
  }
  cache.commitBlob(file.sha256, commit, file.path);
  const seconds = (performance.now() - started) / 1000;
  options.log(`downloaded ${file.path}: ${mib(file.size - resumedFrom)} in ${seconds.toFixed(1)} s, SHA-256 checked, at ${snapshot}`);
  return file.size - resumedFrom;
}
