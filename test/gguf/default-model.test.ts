/**
 * The default model as the program sees it: parsed in memory from the build output, and readable from inside a
 * compiled binary run from another directory (scripts/check-embedded-model.ts compiled with bun build --compile).
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { DEFAULT_MODEL_SOURCE, defaultModelPath, loadDefaultModelBytes, openDefaultModel } from "../../src/gguf/default-model.ts";

// llama.cpp loads, model files and the first extraction of llama.cpp's vocab files take seconds on a busy 2-core box
setDefaultTimeout(120_000);

const root = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-embed-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("openDefaultModel parses the converted stories260K", async () => {
  const file = openDefaultModel();
  expect(file.source).toBe(DEFAULT_MODEL_SOURCE);
  expect(file.tensors.length).toBe(47);
  expect(file.metadata.get("general.name")?.value).toBe("stories260K");
  expect(await loadDefaultModelBytes()).toEqual(new Uint8Array(readFileSync(defaultModelPath())));
});

test("a compiled binary reads the embedded model from any directory", async () => {
  const exe = join(dir, "check-embedded-model");
  await $`${process.execPath} build --compile ${join(root, "scripts/check-embedded-model.ts")} --outfile ${exe}`.cwd(root).quiet();
  const out = await $`${exe}`.cwd("/").text();
  const report = JSON.parse(out) as { path: string; sizeBytes: number; sha256: string; numTensors: number; numTensorsByPath: number };
  const onDisk = readFileSync(defaultModelPath());
  expect(report.path).toStartWith("/$bunfs/");
  expect(report.numTensors).toBe(47);
  expect(report.numTensorsByPath).toBe(47);
  expect(report.sizeBytes).toBe(onDisk.length);
  expect(report.sha256).toBe(createHash("sha256").update(onDisk).digest("hex"));
}, 120_000);
