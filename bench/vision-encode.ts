/**
 * Image encoding time, fennec's kernel encoder (src/vision/backend-encoder.ts on the WASM kernels) beside
 * llama-mtmd-cli's ("image slice encoded in N ms", mtmd-helper.cpp) on the same projector and image: Gemma 3's
 * SigLIP at 896 px (4096 patches, 1152 wide, 16 heads) with --layers of its 27 layers (random f16 weights), under the
 * tiny Gemma 3 language model so llama.cpp can load it. Not a test.
 * Usage: bun run bench/vision-encode.ts [--layers N] [--threads N] [--cli PATH]
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { $ } from "bun";
import { createBackend } from "../src/backend/create-backend.ts";
import { readGguf } from "../src/gguf/reader.ts";
import { BackendVisionEncoder } from "../src/vision/backend-encoder.ts";
import { readVisionConfig, readVisionWeights } from "../src/vision/mmproj.ts";
import { preprocessImage } from "../src/vision/preprocess.ts";
import { llamaMtmdCliPath } from "../test/vision/llama-mtmd-cli.ts";
import { pattern, pngOf } from "../test/vision/test-images.ts";
import { writeGemma3VisionFiles } from "./gemma3-vision-files.ts";

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const layers = Number(arg("layers", "4"));
const threads = Number(arg("threads", "2"));
const cli = arg("cli", llamaMtmdCliPath() ?? "");

const dir = mkdtempSync(join(tmpdir(), "fennec-vision-bench-"));
try {
  const { lmPath, mmPath } = writeGemma3VisionFiles(dir, layers);
  const imgPath = join(dir, "photo.png");
  const rgb = pattern(640, 480, 1);
  writeFileSync(imgPath, pngOf(640, 480, rgb));

  const mm = readGguf(mmPath);
  if (!mm.ok) throw new Error(mm.error);
  const c = readVisionConfig(mm.value);
  if (!c.ok) throw new Error(c.error);
  const w = readVisionWeights(mm.value, c.value);
  if (!w.ok) throw new Error(w.error);
  const encoder = new BackendVisionEncoder(c.value, w.value, await createBackend({ kind: "wasm", threads }));
  const [tile] = preprocessImage({ width: 640, height: 480, data: rgb }, c.value);
  const times: number[] = [];
  for (let run = 0; run < 2; run++) {
    const t0 = performance.now();
    await encoder.embedTile(tile!);
    times.push(performance.now() - t0);
  }
  const fennecMs = Math.min(...times);
  console.log(`fennec (WASM kernels, ${threads} threads): ${layers}-layer SigLIP at ${c.value.imageSize} px encoded in ${fennecMs.toFixed(0)} ms (runs: ${times.map((t) => t.toFixed(0)).join(", ")})`);
  if (cli === "") console.log("llama-mtmd-cli: not built (scripts/build-llama-tool.sh llama-mtmd-cli)");
  else {
    const run = await $`${cli} -m ${lmPath} --mmproj ${mmPath} --image ${imgPath} -p hi -n 1 --temp 0 -t ${threads} -c 512`.quiet().nothrow();
    const ms = /(?:slice encoded|batch encoding done) in (\d+) ms/.exec(run.stderr.toString() + run.stdout.toString())?.[1];
    console.log(ms === undefined ? `llama-mtmd-cli: no timing line (exit ${run.exitCode}): ${run.stderr.toString().split("\n").filter((l) => /encod|image/i.test(l)).slice(-5).join(" | ")}` : `llama-mtmd-cli (${threads} threads): encoded in ${ms} ms; fennec takes ${(fennecMs / Number(ms)).toFixed(2)}x llama.cpp's time`);
  }
  encoder.dispose();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
