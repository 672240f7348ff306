/** Engine sizing: max-model-len default and limit, KV blocks from --kv-cache-memory, the default cap, the override. */
import { describe, expect, test } from "bun:test";
import { resolveEngineConfig } from "../../src/engine/engine-sizing.ts";
import type { EngineArgs } from "../../src/engine/protocol.ts";
import { FakeRunner } from "./fake-runner.ts";

const ARGS: EngineArgs = {
  maxNumSeqs: 4, maxNumBatchedTokens: 64, maxModelLen: null, blockSize: 16, kvCacheMemoryBytes: null,
  enablePrefixCaching: true, threads: 1, device: "cpu",
};
const runner = new FakeRunner({ contextLength: 256 }); // 64 bytes per block of 16

describe("engine config", () => {
  test("max-model-len defaults to the model's context length and may not exceed it", () => {
    expect(resolveEngineConfig(ARGS, runner, 1e9)).toMatchObject({ ok: true, value: { maxModelLen: 256 } });
    expect(resolveEngineConfig({ ...ARGS, maxModelLen: 100 }, runner, 1e9)).toMatchObject({ ok: true, value: { maxModelLen: 100 } });
    expect(resolveEngineConfig({ ...ARGS, maxModelLen: 300 }, runner, 1e9)).toEqual({ ok: false, error: "--max-model-len 300 is greater than the model's context length 256" });
  });
  test("--kv-cache-memory gives floor(bytes / bytes per block) blocks; too little is an error", () => {
    expect(resolveEngineConfig({ ...ARGS, kvCacheMemoryBytes: 64 * 10 + 63 }, runner, 1e9)).toMatchObject({ ok: true, value: { numBlocks: 10 } });
    expect(resolveEngineConfig({ ...ARGS, kvCacheMemoryBytes: 10 }, runner, 1e9)).toEqual({ ok: false, error: "--kv-cache-memory 10 bytes holds no KV block (one block of 16 tokens needs 64 bytes)" });
  });
  test("the default is a share of free memory capped by max-num-seqs x max-model-len", () => {
    // plenty of memory: 4 sequences x 256 tokens / 16 = 64 blocks
    expect(resolveEngineConfig(ARGS, runner, 1e9)).toMatchObject({ ok: true, value: { numBlocks: 64 } });
    // 1 KiB free -> a quarter, 256 bytes -> 4 blocks
    expect(resolveEngineConfig(ARGS, runner, 1024)).toMatchObject({ ok: true, value: { numBlocks: 4 } });
  });
  test("--gpu-memory-utilization: that share of total memory, capped by what the sequences can use; --kv-cache-memory wins", () => {
    // 0.5 of 1280 bytes total = 640 bytes -> 10 blocks (free memory does not matter)
    expect(resolveEngineConfig({ ...ARGS, kvCacheMemoryFraction: 0.5 }, runner, 64, 1280)).toMatchObject({ ok: true, value: { numBlocks: 10 } });
    // plenty: capped at 4 x 256 / 16 = 64 blocks
    expect(resolveEngineConfig({ ...ARGS, kvCacheMemoryFraction: 0.9 }, runner, 64, 1e9)).toMatchObject({ ok: true, value: { numBlocks: 64 } });
    expect(resolveEngineConfig({ ...ARGS, kvCacheMemoryFraction: 0.01 }, runner, 64, 1000)).toEqual({ ok: false, error: "--gpu-memory-utilization 0.01 of 1000 bytes holds no KV block (one block of 16 tokens needs 64 bytes)" });
    expect(resolveEngineConfig({ ...ARGS, kvCacheMemoryFraction: 0.5, kvCacheMemoryBytes: 64 * 3 }, runner, 64, 1280)).toMatchObject({ ok: true, value: { numBlocks: 3 } });
  });
  test("the block override wins", () => {
    expect(resolveEngineConfig({ ...ARGS, kvCacheMemoryBytes: 64 * 100, numKvBlocksOverride: 7 }, runner, 1e9)).toMatchObject({ ok: true, value: { numBlocks: 7 } });
  });
});
