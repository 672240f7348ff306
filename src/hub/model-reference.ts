/**
 * What a `--model` argument names on the Hugging Face Hub, and which GGUF files of a repository it picks.
 * Forms (llama.cpp's `-hf repo[:quant]` and vLLM's `repo:quant_type` GGUF form, plus an exact file):
 *   org/repo             the repository's Q4_K_M file (llama.cpp's default tag), else its first GGUF
 *   org/repo:Q8_0        the file whose name carries the tag (case-insensitive), all parts of a split model
 *   hf://org/repo/f.gguf exactly that file (any folder inside the repository)
 * A path that exists on disk is always a local file, never a reference (checked by the caller).
 * @example parseModelReference("Qwen/Qwen3-0.6B-GGUF:Q8_0") // { repo: "Qwen/Qwen3-0.6B-GGUF", tag: "Q8_0", file: null }
 */
import { err, ok, type Result } from "../util/result.ts";

export interface ModelReference {
  /** "org/name" */
  readonly repo: string;
  /** the quantization tag after ":", or null */
  readonly tag: string | null;
  /** an exact file inside the repository (hf:// form), or null */
  readonly file: string | null;
}

/** llama.cpp's default tag when `-hf` names no quantization (common/arg.cpp: "Q4_K_M") */
export const DEFAULT_TAG = "Q4_K_M";

const NAME = "[A-Za-z0-9][A-Za-z0-9._-]*";
const REPO_AND_TAG = new RegExp(`^(${NAME}/${NAME})(?::([A-Za-z0-9._-]+))?$`);
const HF_URL = new RegExp(`^hf://(${NAME}/${NAME})/(.+\\.gguf)$`, "i");

/** true when the argument has the shape of a Hub reference (the caller checks the disk first) */
export function looksLikeHubReference(argument: string): boolean {
  return argument.startsWith("hf://") || REPO_AND_TAG.test(argument);
}

export function parseModelReference(argument: string): Result<ModelReference> {
  if (argument.startsWith("hf://")) {
    const m = HF_URL.exec(argument);
    if (m === null) return err(`"${argument}" is not a Hugging Face file URL: write hf://org/repo/file.gguf (or org/repo:QUANT for a repository's GGUF)`);
    if (m[2]!.split("/").some((part) => part === ".." || part === "")) return err(`"${argument}": the file path must not contain empty or ".." parts`);
    return ok({ repo: m[1]!, tag: null, file: m[2]! });
  }
  const m = REPO_AND_TAG.exec(argument);
  if (m === null) return err(`"${argument}" is neither a file on disk nor a Hugging Face repository (org/repo or org/repo:QUANT)`);
  if (m[1]!.split("/").some((part) => part === "." || part === "..")) return err(`"${argument}" is not a Hugging Face repository name`);
  return ok({ repo: m[1]!, tag: m[2] ?? null, file: null });
}

/** `name-00001-of-00003.gguf` (llama.cpp's llama_split_path format "%s-%05d-of-%05d.gguf") */
const SPLIT_PART = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** The split prefix and part numbers of a file name, or null for a single-file GGUF. */
export function splitPart(fileName: string): { prefix: string; index: number; count: number } | null {
  const m = SPLIT_PART.exec(fileName);
  return m === null ? null : { prefix: m[1]!, index: Number(m[2]), count: Number(m[3]) };
}

/** Every GGUF of a repository listing that holds weights (projector files of multimodal repos are not models). */
function modelGgufs(files: readonly string[]): string[] {
  return files.filter((f) => /\.gguf$/i.test(f) && !/(^|\/)mmproj/i.test(f)).sort();
}

/** the tag as a whole word of the file name: Q4_K matches "-Q4_K.gguf", never "-Q4_K_M.gguf" */
function carriesTag(file: string, tag: string): boolean {
  const base = (file.split("/").pop() ?? file).replace(/\.gguf$/i, "").replace(/-\d{5}-of-\d{5}$/i, "");
  const escaped = tag.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[-_.])${escaped}$`, "i").test(base);
}

/** The file and, for a split model, every part in order. */
function withParts(first: string, files: readonly string[]): Result<string[]> {
  const split = splitPart(first);
  if (split === null) return ok([first]);
  const parts: string[] = [];
  for (let i = 1; i <= split.count; i++) {
    const name = `${split.prefix}-${String(i).padStart(5, "0")}-of-${String(split.count).padStart(5, "0")}.gguf`;
    const found = files.find((f) => f.toLowerCase() === name.toLowerCase());
    if (found === undefined) return err(`the split model ${first} has ${split.count} parts, but the repository has no ${name}`);
    parts.push(found);
  }
  return ok(parts);
}

export interface PickedFiles {
  /** the files to fetch, the first part first */
  readonly files: readonly string[];
  /** why these (logged): "tag Q8_0", "the default tag Q4_K_M", "the only GGUF" ... */
  readonly reason: string;
}

/**
 * The GGUF file(s) of `repoFiles` (paths inside the repository) that `ref` names.
 * @example pickGgufFiles({ repo: "a/b", tag: "Q8_0", file: null }, ["m-Q4_K_M.gguf", "m-Q8_0.gguf"]) // files ["m-Q8_0.gguf"]
 */
export function pickGgufFiles(ref: ModelReference, repoFiles: readonly string[]): Result<PickedFiles> {
  if (ref.file !== null) {
    const found = repoFiles.find((f) => f === ref.file);
    if (found === undefined) return err(`${ref.repo} has no file ${ref.file}`);
    const parts = withParts(found, repoFiles);
    return parts.ok ? ok({ files: parts.value, reason: "the file named" }) : parts;
  }
  const ggufs = modelGgufs(repoFiles);
  if (ggufs.length === 0) return err(`${ref.repo} holds no GGUF file: fennec loads GGUF models (pick a repository with "GGUF" in its name, or convert the model with llama.cpp's convert_hf_to_gguf.py)`);
  // a split model counts once, by its first part
  const firstParts = ggufs.filter((f) => (splitPart(f)?.index ?? 1) === 1);
  const tags = [...new Set(firstParts.map((f) => tagOf(f)))].join(", ");
  const tag = ref.tag ?? DEFAULT_TAG;
  const matching = firstParts.filter((f) => carriesTag(f, tag));
  if (matching.length > 1) return err(`several GGUF files of ${ref.repo} carry the tag ${tag} (${matching.join(", ")}): name one as hf://${ref.repo}/<file>`);
  let chosen = matching[0];
  let reason = ref.tag === null ? `the default tag ${DEFAULT_TAG}` : `the tag ${tag}`;
  if (chosen === undefined) {
    if (ref.tag !== null) return err(`${ref.repo} has no GGUF file for the tag ${ref.tag}; its files carry: ${tags}`);
    // llama.cpp's -hf takes the first GGUF when the default tag is missing
    chosen = firstParts[0]!;
    reason = firstParts.length === 1 ? "the only GGUF" : `no ${DEFAULT_TAG} file, so the first GGUF (tags: ${tags})`;
  }
  const parts = withParts(chosen, repoFiles);
  return parts.ok ? ok({ files: parts.value, reason }) : parts;
}

/** "Q4_K_M" of "org-model-Q4_K_M.gguf": the last dash- or dot-separated word, for error messages */
function tagOf(file: string): string {
  const base = (file.split("/").pop() ?? file).replace(/\.gguf$/i, "").replace(/-\d{5}-of-\d{5}$/i, "");
  return base.split(/[-.]/).pop() ?? base;
}
