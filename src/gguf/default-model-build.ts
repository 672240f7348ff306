/**
 * The build step that makes the embedded default model: stories260K.bin + tok512.bin (llama2.c format, Andrej
 * Karpathy, MIT) -> build/default-model.gguf via our own converter. The inputs come from ../shared/models/ or, where
 * that folder is absent, from the pinned upstream URLs (cached in .cache/models/); either way their sha256 must match
 * PROVENANCE.md.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { convertLlama2c } from "./llama2c.ts";
import { writeGgufFile } from "./writer.ts";
import { errorMessage } from "../util/error-message.ts";

const UPSTREAM = "https://huggingface.co/karpathy/tinyllamas/resolve/0bd21da7698eaf29a0d7de3992de8a46ef624add/stories260K";

/** The two inputs, pinned (shared/models/PROVENANCE.md). */
export const DEFAULT_MODEL_FILES = [
  { name: "stories260K.bin", bytes: 1_056_540, sha256: "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696" },
  { name: "tok512.bin", bytes: 6_227, sha256: "037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312" },
] as const;
const DEFAULT_MODEL_NAME = "stories260K";

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

async function fetchPinned(file: (typeof DEFAULT_MODEL_FILES)[number], cacheDir: string): Promise<Uint8Array> {
  const cached = join(cacheDir, file.name);
  if (existsSync(cached)) return readFileSync(cached);
  const url = `${UPSTREAM}/${file.name}`;
  process.stdout.write(`build: downloading ${url}\n`);
  const response = await fetch(url);
  if (!response.ok) throw new Error(`default model: download of ${url} failed: HTTP ${response.status}`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (sha256(bytes) !== file.sha256) throw new Error(`default model: ${url} has sha256 ${sha256(bytes)}, expected ${file.sha256}`);
  mkdirSync(cacheDir, { recursive: true });
  writeFileSync(`${cached}.${process.pid}.tmp`, bytes);
  renameSync(`${cached}.${process.pid}.tmp`, cached);
  return bytes;
}

/** One input: from the shared folder if it is there (checked against its pin), else downloaded. */
async function input(file: (typeof DEFAULT_MODEL_FILES)[number], sharedModelsDir: string, cacheDir: string): Promise<Uint8Array> {
  const local = join(sharedModelsDir, file.name);
  return existsSync(local) ? readFileSync(local) : fetchPinned(file, cacheDir);
}

/** Checks the pinned inputs' hashes, converts, and writes `outPath` atomically. */
function convertAndWrite(checkpoint: Uint8Array, tokenizer: Uint8Array, outPath: string): void {
  DEFAULT_MODEL_FILES.forEach((f, i) => {
    const hash = sha256(i === 0 ? checkpoint : tokenizer);
    if (hash !== f.sha256) throw new Error(`default model: ${f.name} has sha256 ${hash}, expected ${f.sha256} (PROVENANCE.md)`);
  });
  const gguf = convertLlama2c(checkpoint, tokenizer, DEFAULT_MODEL_NAME, { checkpoint: DEFAULT_MODEL_FILES[0].name, tokenizer: DEFAULT_MODEL_FILES[1].name });
  if (!gguf.ok) throw new Error(`default model: ${gguf.error}`);
  mkdirSync(dirname(outPath), { recursive: true });
  const tmp = `${outPath}.${process.pid}.tmp`; // per process: parallel test runs may build at once
  writeGgufFile(tmp, gguf.value);
  renameSync(tmp, outPath); // never leave a half-written model where the binary build picks it up
}

/**
 * Converts the default model into `outPath` (GGUF, F32). Throws with a one-line message on a bad or missing input.
 * @example await buildDefaultModel("../shared/models", "build/default-model.gguf")
 */
export async function buildDefaultModel(sharedModelsDir: string, outPath: string, cacheDir = join(dirname(outPath), "..", ".cache", "models")): Promise<void> {
  const [checkpoint, tokenizer] = await Promise.all(DEFAULT_MODEL_FILES.map((f) => input(f, sharedModelsDir, cacheDir)));
  convertAndWrite(checkpoint!, tokenizer!, outPath);
}

/** The same from local files only (no download), for a source checkout that has not run the build. */
export function buildDefaultModelFromLocalFiles(sharedModelsDir: string, outPath: string): void {
  const [checkpoint, tokenizer] = DEFAULT_MODEL_FILES.map((f) => {
    const local = join(sharedModelsDir, f.name);
    if (!existsSync(local)) throw new Error(`default model: ${local} is missing and the build has not run (run: npx bun run build)`);
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
