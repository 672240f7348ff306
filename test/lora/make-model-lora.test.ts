/**
 * make-model's LoRA flags end to end: the script writes a base and adapters for its shape, they read back against the
 * base with the rank, alpha and targets asked for, llama.cpp loads them and its greedy tokens change with each; bad
 * flags are one line and exit 2.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Llama } from "node-llama-cpp";
import { readGguf } from "../../src/gguf/reader.ts";
import { readLoraAdapter } from "../../src/lora/read-lora-adapter.ts";
import { readModelConfig } from "../../src/model/read-model-config.ts";
import { disposeLlamaCpp, openLlamaCpp } from "../helpers/llama-cpp.ts";

const ROOT = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-make-lora-"));
let llama: Llama;

function makeModel(...args: string[]): { code: number; stderr: string } {
  const r = Bun.spawnSync([process.execPath, "run", join(ROOT, "scripts/make-model.ts"), "--shape", "tiny-smollm2-135m", ...args], { cwd: ROOT, stderr: "pipe" });
  return { code: r.exitCode, stderr: r.stderr.toString() };
}

beforeAll(async () => {
  llama = await openLlamaCpp();
}, 120_000);
afterAll(async () => {
  await disposeLlamaCpp(llama);
  rmSync(dir, { recursive: true, force: true });
});

describe("make-model --lora-out", () => {
  test("writes a base and adapters that read back and that llama.cpp applies", async () => {
    const base = join(dir, "base.gguf");
    const a = join(dir, "a.gguf");
    const b = join(dir, "b.gguf");
    expect(makeModel("--type", "f32", "--out", base, "--lora-out", a, "--lora-rank", "8", "--lora-alpha", "16").code).toBe(0);
    const onlyB = makeModel("--lora-out", b, "--seed", "7", "--lora-rank", "16", "--lora-alpha", "32", "--lora-targets", "attn_q,attn_v,ffn_down", "--lora-type", "f16");
    expect(onlyB.code).toBe(0);
    expect(onlyB.stderr).toContain("LoRA for tiny-smollm2-135m, rank 16, alpha 32, 6 targets");

    const file = readGguf(base);
    if (!file.ok) throw new Error(file.error);
    const config = readModelConfig(file.value);
    if (!config.ok) throw new Error(config.error);
    const ra = readLoraAdapter(a, { config: config.value, maxLoraRank: 16 });
    const rb = readLoraAdapter(b, { config: config.value, maxLoraRank: 16 });
    if (!ra.ok || !rb.ok) throw new Error(!ra.ok ? ra.error : !rb.ok ? rb.error : "");
    expect([ra.value.rank, ra.value.alpha, ra.value.layers.length, ra.value.layers[0]!.size]).toEqual([8, 16, config.value.numLayers, 7]);
    expect([rb.value.rank, rb.value.alpha, [...rb.value.layers[1]!.keys()]]).toEqual([16, 32, ["attn_q", "attn_v", "ffn_down"]]);
    expect(readLoraAdapter(b, { config: config.value, maxLoraRank: 8 })).toMatchObject({ ok: false });

    const model = await llama.loadModel({ modelPath: base });
    const greedy = async (lora: string | null): Promise<number[]> => {
      const ctx = await model.createContext({ contextSize: 64, threads: 1, ...(lora === null ? {} : { lora: { adapters: [{ filePath: lora, scale: 1 }] } }) });
      const tokens: number[] = [];
      for await (const t of ctx.getSequence().evaluate(model.tokenize("Once upon a time"), { temperature: 0 })) {
        tokens.push(Number(t));
        if (tokens.length === 8) break;
      }
      await ctx.dispose();
      return tokens;
    };
    const runs = [await greedy(null), await greedy(a), await greedy(b)];
    await model.dispose();
    expect(runs.every((r) => r.length === 8)).toBe(true);
    expect(new Set(runs.map((r) => r.join(","))).size).toBe(3);
  }, 120_000);

  test("bad LoRA flags are one line and exit 2", () => {
    const cases: [string[], RegExp][] = [
      [["--lora-out", join(dir, "x.gguf"), "--lora-targets", "attn_q,nope"], /unknown LoRA target "nope"/],
      [["--lora-out", join(dir, "x.gguf"), "--lora-rank", "0"], /--lora-rank must be a positive integer/],
      [["--lora-out", join(dir, "x.gguf"), "--lora-alpha", "big"], /--lora-alpha must be a positive number/],
      [["--lora-out", join(dir, "x.gguf"), "--lora-type", "q8_0"], /--lora-type must be f32 or f16/],
      [["--lora-rank", "8"], /--shape, --type and --out \(or --lora-out alone\) are required/],
    ];
    for (const [args, message] of cases) {
      const r = makeModel(...args);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
    }
  });
});
