/**
 * Where the tests find the default model's inputs and golden outputs, all inside the repository: the two llama2.c
 * files as the build caches them (.cache/models/, src/gguf/default-model-build.ts) and the golden JSON under
 * test/fixtures/ (made by scripts/make-golden.ts). A missing file is an error that names the command that makes it,
 * never a skipped test.
 * @example const golden = readGolden(); const ckpt = readFileSync(defaultModelInput("stories260K.bin"));
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const ROOT = join(import.meta.dir, "..", "..");
/** the build's copy of stories260K.bin and tok512.bin */
export const DEFAULT_MODEL_INPUTS_DIR = join(ROOT, ".cache", "models");
export const GOLDEN_PATH = join(ROOT, "test", "fixtures", "stories260K-golden.json");

export interface GoldenTokenization { readonly text: string; readonly ids: number[]; readonly idsParseSpecial: number[] }
export interface Golden {
  readonly source: string;
  readonly greedyFromBos: { readonly ids: number[]; readonly text: string };
  readonly tokenize: GoldenTokenization[];
  readonly notes: string;
}

/** The path of one of the two inputs; throws when the build has not run. */
export function defaultModelInput(name: "stories260K.bin" | "tok512.bin"): string {
  const path = join(DEFAULT_MODEL_INPUTS_DIR, name);
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npx bun run build\` first (npm test does)`);
  return path;
}

/** llama.cpp's reference outputs on the default model (test/fixtures/stories260K-golden.json). */
export function readGolden(): Golden {
  if (!existsSync(GOLDEN_PATH)) throw new Error(`${GOLDEN_PATH} is missing: run \`npx bun run scripts/make-golden.ts\``);
  return JSON.parse(readFileSync(GOLDEN_PATH, "utf8")) as Golden;
}
