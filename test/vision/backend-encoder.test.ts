/**
 * The vision encoder on the kernels (backend-encoder.ts) against the plain reference encoder (its oracle), on the
 * reference backend and on the WASM kernels: a small SigLIP and make-model's real-width one (1152 wide, 16 heads of 72).
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createBackend } from "../../src/backend/create-backend.ts";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { BackendVisionEncoder } from "../../src/vision/backend-encoder.ts";
import { readVisionConfig, readVisionWeights } from "../../src/vision/mmproj.ts";
import { preprocessImage } from "../../src/vision/preprocess.ts";
import { embedImagesReference } from "../../src/vision/reference-encoder.ts";
import { VISION_SHAPES } from "../../scripts/model-shapes.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";
import { smallMmproj } from "./small-mmproj.ts";
import { pattern } from "./test-images.ts";

await ensureKernels();
// the plain reference encoder at real width on a busy 2-core box
setDefaultTimeout(120_000);

const cases = [
  { name: "small SigLIP (64 wide, 4 heads)", file: () => smallMmproj() },
  { name: "tiny-gemma3-4b's real-width SigLIP (1 layer)", file: () => smallMmproj({ ...VISION_SHAPES["tiny-gemma3-4b"]!, numLayers: 1 }, 4) },
];

describe.each(["reference", "wasm"] as const)("vision encoder on the %s backend", (backendName) => {
  test.each(cases)("$name: the reference encoder's embeddings, within the kernels' rounding", async ({ file }) => {
    const mm = file();
    const c = readVisionConfig(mm);
    if (!c.ok) throw new Error(c.error);
    const w = readVisionWeights(mm, c.value);
    if (!w.ok) throw new Error(w.error);
    const backend = backendName === "wasm" ? await createBackend({ kind: "wasm", threads: 2 }) : new ReferenceBackend();
    const encoder = new BackendVisionEncoder(c.value, w.value, backend);
    for (const [width, height, seed] of [[70, 40, 1], [30, 90, 2]] as const) {
      const [tile] = preprocessImage({ width, height, data: pattern(width, height, seed) }, c.value);
      const [expected] = embedImagesReference([tile!], c.value, w.value);
      const ours = await encoder.embedTile(tile!);
      let maxDiff = 0, maxAbs = 0, dot = 0, n1 = 0, n2 = 0;
      for (let i = 0; i < ours.length; i++) {
        maxDiff = Math.max(maxDiff, Math.abs(ours[i]! - expected![i]!));
        maxAbs = Math.max(maxAbs, Math.abs(expected![i]!));
        dot += ours[i]! * expected![i]!; n1 += ours[i]! ** 2; n2 += expected![i]! ** 2;
      }
      expect(ours.length).toBe(expected!.length);
      // f32 weights and matmuls on both; measured 1e-7 (reference backend) and 5e-5 (WASM, f16 K/V) of the largest value
      console.log(`backend-encoder ${backendName} ${width}x${height}: max |diff| ${(maxDiff / maxAbs).toExponential(2)} of the largest, cosine ${(dot / Math.sqrt(n1 * n2)).toFixed(8)}`);
      expect(maxDiff / maxAbs).toBeLessThan(2e-4);
      expect(dot / Math.sqrt(n1 * n2)).toBeGreaterThan(0.9999999);
    }
    encoder.dispose();
  });
});
