/**
 * The build step that makes the embedded default model: stories260K.bin + tok512.bin (llama2.c format, Andrej
 * Karpathy, MIT) -> build/default-model.gguf via our own converter. The inputs come from ../shared/models/ or, where
 * that folder is absent, from the pinned Hugging Face revision (HF_ENDPOINT moves the host, as huggingface_hub reads
 * it); either way their sha256 must match the pins below, and a copy stays in .cache/models/ beside build/, where the
 * tests read them.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { convertLlama2c } from "./llama2c.ts";
import { writeGgufFile } from "./writer.ts";
import { errorMessage } from "../util/error-message.ts";

/** The pinned upstream path under the Hub's address (karpathy/tinyllamas at one revision). */
const UPSTREAM_PATH = "karpathy/tinyllamas/resolve/0bd21da7698eaf29a0d7de3992de8a46ef624add/stories260K";

/** Where `name` is downloaded from: HF_ENDPOINT (default https://huggingface.co), as huggingface_hub's constants.py reads it. */
export function upstreamUrl(name: string, env: Record<string, string | undefined> = process.env): string {
  return `${(env["HF_ENDPOINT"] || "https://huggingface.co").replace(/\/+$/, "")}/${UPSTREAM_PATH}/${name}`;
}

/** The two inputs, pinned: Karpathy's tinyllamas, MIT. */
export const DEFAULT_MODEL_FILES = [
  { name: "stories260K.bin", bytes: 1_056_540, sha256: "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696" },
  { name: "tok512.bin", bytes: 6_227, sha256: "037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312" },
] as const;
const DEFAULT_MODEL_NAME = "stories260K";

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

/** Writes `bytes` to `path` atomically (per process: parallel test runs may build at once). */
function writeAtomically(path: string, bytes: Uint8Array): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(`${path}.${process.pid}.tmp`, bytes);
  renameSync(`${path}.${process.pid}.tmp`, path);
}

async function download(file: (typeof DEFAULT_MODEL_FILES)[number], sharedModelsDir: string): Promise<Uint8Array> {
  const url = upstreamUrl(file.name);
  process.stdout.write(`build: ${join(sharedModelsDir, file.name)} is absent: downloading ${url}\n`);
  const response = await fetch(url).catch((e: unknown) => {
    throw new Error(`default model: download of ${url} failed: ${errorMessage(e)}`);
  });
  if (!response.ok) throw new Error(`default model: download of ${url} failed: HTTP ${response.status}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (sha256(bytes) !== file.sha256) throw new Error(`default model: ${url} has sha256 ${sha256(bytes)}, expected ${file.sha256}`);
  return bytes;
}

/**
 * One input: the cached copy, else the shared folder's file, else downloaded; a new one is checked against its pin
 * and cached, so the tests find both inputs in `cacheDir` whichever way the build got them.
 */
async function input(file: (typeof DEFAULT_MODEL_FILES)[number], sharedModelsDir: string, cacheDir: string): Promise<Uint8Array> {
  const cached = join(cacheDir, file.name);
  if (existsSync(cached)) {
    const bytes = readFileSync(cached);
    if (sha256(bytes) === file.sha256) return bytes;
  }
  const local = join(sharedModelsDir, file.name);
  const bytes = existsSync(local) ? readFileSync(local) : await download(file, sharedModelsDir);
  if (sha256(bytes) !== file.sha256) throw new Error(`default model: ${local} has sha256 ${sha256(bytes)}, expected ${file.sha256}`);
  writeAtomically(cached, bytes);
  return bytes;
}

/** Checks the pinned inputs' hashes, converts, and writes `outPath` atomically. */
function convertAndWrite(checkpoint: Uint8Array, tokenizer: Uint8Array, outPath: string): void {
  DEFAULT_MODEL_FILES.forEach((f, i) => {
    const hash = sha256(i === 0 ? checkpoint : tokenizer);
    if (hash !== f.sha256) throw new Error(`default model: ${f.name} has sha256 ${hash}, expected ${f.sha256}`);
  });
  const gguf = convertLlama2c(checkpoint, tokenizer, DEFAULT_MODEL_NAME, { checkpoint: DEFAULT_MODEL_FILES[0].name, tokenizer: DEFAULT_MODEL_FILES[1].name });
  if (!gguf.ok) throw new Error(`default model: ${gguf.error}`);
  mkdirSync(dirname(outPath), { recursive: true });
  const tmp = `${outPath}.${process.pid}.tmp`; // per process: parallel test runs may build at once
  writeGgufFile(tmp, gguf.value);
  renameSync(tmp, outPath); // never leave a half-written model where the binary build picks it up
}

/** .cache/models beside the output's folder: <root>/.cache/models for <root>/build/default-model.gguf */
const defaultCacheDir = (outPath: string): string => join(dirname(outPath), "..", ".cache", "models");

/**
 * Converts the default model into `outPath` (GGUF, F32). Throws with a one-line message on a bad or missing input.
 * @example await buildDefaultModel("../shared/models", "build/default-model.gguf")
 */
export async function buildDefaultModel(sharedModelsDir: string, outPath: string, cacheDir = defaultCacheDir(outPath)): Promise<void> {
  const [checkpoint, tokenizer] = await Promise.all(DEFAULT_MODEL_FILES.map((f) => input(f, sharedModelsDir, cacheDir)));
  convertAndWrite(checkpoint!, tokenizer!, outPath);
}

/** The same from local files only (the build's cached copy, else the shared folder; no download), for a source checkout whose build/ is gone. */
export function buildDefaultModelFromLocalFiles(sharedModelsDir: string, outPath: string, cacheDir = defaultCacheDir(outPath)): void {
  const [checkpoint, tokenizer] = DEFAULT_MODEL_FILES.map((f) => {
    const local = [join(cacheDir, f.name), join(sharedModelsDir, f.name)].find((p) => existsSync(p));
    if (local === undefined) throw new Error(`default model: ${join(sharedModelsDir, f.name)} is missing and the build has not run (run: npx bun run build)`);
    return readFileSync(local);
  });
  convertAndWrite(checkpoint!, tokenizer!, outPath);
}

// `bun run src/gguf/default-model-build.ts [sharedModelsDir] [outPath]` (no top-level await: the binary require()s this file)
if (import.meta.main) {
  const [shared = join(import.meta.dir, "../../../shared/models"), out = join(import.meta.dir, "../../build/default-model.gguf")] = process.argv.slice(2);
  buildDefaultModel(shared, out).then(() => console.log(out), (e: unknown) => {
    console.error(errorMessage(e));
    process.exitCode = 1;
  });
}
