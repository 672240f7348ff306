/**
 * The Hugging Face cache layout (huggingface_hub/file_download.py: hf_hub_download, _create_symlink), so files fetched
 * here are found by vLLM, transformers and `hf download`, and theirs by fennec:
 *   <cache>/models--org--name/refs/<revision>            the commit hash the revision pointed at
 *   <cache>/models--org--name/blobs/<sha256>             the file's bytes, named by its LFS SHA-256
 *   <cache>/models--org--name/blobs/<sha256>.incomplete  a download in progress (resumed from its length)
 *   <cache>/models--org--name/snapshots/<commit>/<path>  a relative symlink to ../../blobs/<sha256>
 * @example const repo = repoCache("/root/.cache/huggingface/hub", "Qwen/Qwen3-0.6B-GGUF"); repo.snapshotFile(commit, "x.gguf")
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const COMMIT_HASH = /^[0-9a-f]{40}$/;

export interface RepoCache {
  readonly folder: string;
  blob(sha256: string): string;
  incomplete(sha256: string): string;
  snapshotFile(commit: string, file: string): string;
  /** the commit a revision points at in the cache (a commit hash is its own), or null */
  commitOf(revision: string): string | null;
  /** every file of a cached snapshot, as paths inside the repository */
  snapshotFiles(commit: string): string[];
  /** moves a finished download into blobs/ and links it from the snapshot */
  commitBlob(sha256: string, commit: string, file: string): string;
  /** refs/<revision> = commit (a commit hash is never written as a ref, as huggingface_hub) */
  writeRef(revision: string, commit: string): void;
}

export function repoCache(cacheDir: string, repo: string): RepoCache {
  const folder = join(cacheDir, `models--${repo.split("/").join("--")}`);
  const blob = (sha256: string): string => join(folder, "blobs", sha256);
  const snapshotFile = (commit: string, file: string): string => join(folder, "snapshots", commit, ...file.split("/"));
  return {
    folder,
    blob,
    incomplete: (sha256) => `${blob(sha256)}.incomplete`,
    snapshotFile,
    commitOf(revision) {
      if (COMMIT_HASH.test(revision)) return existsSync(join(folder, "snapshots", revision)) ? revision : null;
      try {
        const commit = readFileSync(join(folder, "refs", revision), "utf8").trim();
        return COMMIT_HASH.test(commit) ? commit : null;
      } catch {
        return null;
      }
    },
    snapshotFiles(commit) {
      const root = join(folder, "snapshots", commit);
      const out: string[] = [];
      const walk = (dir: string): void => {
        let entries: string[];
        try { entries = readdirSync(dir); } catch { return; }
        for (const name of entries) {
          const path = join(dir, name);
          let isDir = false;
          try { isDir = statSync(path).isDirectory(); } catch { continue; } // a dangling link is no file
          if (isDir) walk(path);
          else out.push(relative(root, path).split("\\").join("/"));
        }
      };
      walk(root);
      return out.sort();
    },
    commitBlob(sha256, commit, file) {
      mkdirSync(dirname(blob(sha256)), { recursive: true });
      renameSync(`${blob(sha256)}.incomplete`, blob(sha256));
      return linkSnapshot(blob(sha256), snapshotFile(commit, file));
    },
    writeRef(revision, commit) {
      if (COMMIT_HASH.test(revision)) return;
      mkdirSync(join(folder, "refs"), { recursive: true });
      writeFileSync(join(folder, "refs", revision), commit);
    },
  };
}

/** snapshots/<commit>/<file> -> the blob, as a relative link (huggingface_hub _create_symlink) */
function linkSnapshot(blobPath: string, linkPath: string): string {
  mkdirSync(dirname(linkPath), { recursive: true });
  rmSync(linkPath, { force: true });
  symlinkSync(relative(dirname(linkPath), blobPath), linkPath);
  return linkPath;
}
