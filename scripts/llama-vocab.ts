/**
 * llama.cpp's vocab-only GGUFs and their tokenizer test vectors, taken from the llama.cpp source bundle that the npm
 * package node-llama-cpp ships (`llama/gitRelease.bundle`, one squashed commit). Only `models/` is extracted, once, into
 * the gitignored `.cache/llama.cpp/models` (about 75 MB, ~5 s). Nothing here is committed or downloaded.
 *
 * Safe to call from parallel test processes: each extracts into its own temporary folder and renames it into place;
 * the loser of the race throws its copy away.
 *
 * @example const gguf = llamaVocabPath("qwen2"); // .../.cache/llama.cpp/models/ggml-vocab-qwen2.gguf
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
const BUNDLE_PATH = join(ROOT, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
/** the single commit in node-llama-cpp@3.21.1's bundle (llama.cpp release tag v0.4.0) */
const BUNDLE_COMMIT = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed";
const CACHE_DIR = join(ROOT, ".cache/llama.cpp");
const MODELS_DIR = join(CACHE_DIR, "models");

/** The extracted `models/` folder of llama.cpp (vocab GGUFs, .inp/.out vectors, `templates/*.jinja`). */
export function llamaModelsDir(): string {
  if (existsSync(MODELS_DIR)) return MODELS_DIR;
  if (!existsSync(BUNDLE_PATH)) throw new Error(`llama-vocab: ${BUNDLE_PATH} is missing (run npm install; node-llama-cpp is a devDependency)`);
  const tmp = `${CACHE_DIR}.tmp-${process.pid}-${Date.now()}`;
  try {
    mkdirSync(tmp, { recursive: true });
    const gitDir = join(tmp, "repo.git");
    const git = (...args: string[]) => execFileSync("git", args, { stdio: ["ignore", "ignore", "pipe"] });
    git("init", "-q", "--bare", gitDir);
    git("--git-dir", gitDir, "fetch", "-q", BUNDLE_PATH, BUNDLE_COMMIT);
    git("--git-dir", gitDir, "--work-tree", tmp, "checkout", BUNDLE_COMMIT, "--", "models");
    rmSync(gitDir, { recursive: true, force: true });
    mkdirSync(join(ROOT, ".cache"), { recursive: true });
    try {
      renameSync(tmp, CACHE_DIR);
    } catch (e) {
      if (!existsSync(MODELS_DIR)) throw e; // someone else won the race: fine
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return MODELS_DIR;
}

/**
 * Path of `ggml-vocab-<name>.gguf` plus `suffix` ("" for the GGUF, ".inp" / ".out" for the test vectors).
 * @example llamaVocabPath("llama-spm", ".inp")
 */
export function llamaVocabPath(name: string, suffix: "" | ".inp" | ".out" = ""): string {
  const path = join(llamaModelsDir(), `ggml-vocab-${name}.gguf${suffix}`);
  if (!existsSync(path)) throw new Error(`llama-vocab: no ${path} in llama.cpp's models/ folder`);
  return path;
}

/** Path of one of llama.cpp's reference chat templates, `models/templates/<name>.jinja`. */
export function llamaTemplatePath(name: string): string {
  const path = join(llamaModelsDir(), "templates", `${name}.jinja`);
  if (!existsSync(path)) throw new Error(`llama-vocab: no ${path} in llama.cpp's models/templates folder`);
  return path;
}

if (import.meta.main) console.log(llamaModelsDir());
