/**
 * The whole-stack golden check (llama2.c's test_all.py): greedy generation from BOS on the embedded default model
 * (stories260K, converted by our own converter) reproduces the 255 token ids llama.cpp produced
 * (test/fixtures/stories260K-golden.json), with the reference forward, with the batched runner, and through the
 * `fennec generate --json` command line (from source, and the compiled binary when it is built).
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ReferenceBackend } from "../../src/backend/reference.ts";
import { openDefaultModel } from "../../src/gguf/default-model.ts";
import { argmax, decodeTokens } from "../../src/model/decode-loop.ts";
import { loadModel, type LoadedModel } from "../../src/model/load-model.ts";
import { ReferenceForward } from "../../src/model/reference-forward.ts";
import { Runner } from "../../src/model/runner.ts";
import { createTokenizer } from "../../src/tokenizer/gguf-tokenizer.ts";
import { readGolden } from "../helpers/default-model-files.ts";
import { ensureKernels } from "../kernels/ensure-kernels.ts";

// generate and the wasm runner need build/kernels-*.wasm; `bun test` does not run the build
await ensureKernels();

const ROOT = join(import.meta.dir, "..", "..");
const BINARY = join(ROOT, "dist", "fennec");
const golden = readGolden();
const expectedIds = golden.greedyFromBos.ids;

function defaultModel(): LoadedModel {
  const model = loadModel(openDefaultModel());
  if (!model.ok) throw new Error(model.error);
  return model.value;
}

describe("stories260K greedy from BOS", () => {
  const model = defaultModel();
  const bos = createTokenizer(model.gguf).bosId!;

  test("the golden file holds 255 ids", () => {
    expect(expectedIds.length).toBe(255);
    expect(bos).toBe(1);
  });

  test("reference forward reproduces the 255 golden ids", () => {
    const ref = new ReferenceForward(model.config, model.weights, 256);
    const ids: number[] = [];
    let token = bos;
    for (let pos = 0; pos < expectedIds.length; pos++) {
      token = argmax(ref.forward(token, pos));
      ids.push(token);
    }
    expect(ids).toEqual([...expectedIds]);
  });

  test("batched runner (reference backend, paged KV) reproduces the 255 golden ids", async () => {
    const runner = new Runner(model.config, model.weights, new ReferenceBackend());
    const ids: number[] = [];
    for await (const id of decodeTokens(runner, [bos], { maxTokens: expectedIds.length, stopIds: [], pick: argmax, blockSize: 16 })) ids.push(id);
    runner.dispose();
    expect(ids).toEqual([...expectedIds]);
  });

  const GENERATE_ARGS = ["generate", "--prompt", "", "--max-tokens", "255", "--temperature", "0", "--json"];
  const expectGolden = (run: ReturnType<typeof Bun.spawnSync>): void => {
    expect(run.stderr?.toString()).toBe("");
    expect(run.exitCode).toBe(0);
    const out = JSON.parse(run.stdout!.toString()) as { token_ids: number[]; text: string };
    expect(Object.keys(out)).toEqual(["token_ids", "text"]);
    expect(out.token_ids).toEqual([...expectedIds]);
    expect(out.text).toBe(golden.greedyFromBos.text);
  };

  test("`fennec generate --prompt '' --max-tokens 255 --temperature 0 --json` (source, WASM kernels) prints the golden ids and text", () => {
    expectGolden(Bun.spawnSync([process.execPath, "run", join(ROOT, "src", "cli.ts"), ...GENERATE_ARGS], { cwd: ROOT }));
  });

  // the compiled binary, run from / with nothing beside it, when `bun run build.ts` has made it
  test.skipIf(!existsSync(BINARY))("dist/fennec generate ... --json (compiled binary, from /) prints the golden ids and text", () => {
    expectGolden(Bun.spawnSync([BINARY, ...GENERATE_ARGS], { cwd: "/" }));
  });
});
