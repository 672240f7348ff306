/** vLLM's LoRA flags as one config (config/lora-config.ts): defaults, checks and --lora-modules' two forms. */
import { describe, expect, test } from "bun:test";
import { loraConfig, parseLoraModule } from "../../src/config/lora-config.ts";

const HERE = import.meta.path;
const flags = (over: Partial<Parameters<typeof loraConfig>[0]>) => loraConfig({ enableLora: true, modules: [], maxLoras: null, maxLoraRank: null, maxCpuLoras: null, ...over });

describe("loraConfig", () => {
  test("vLLM's defaults: max_loras 1, max_lora_rank 16, max_cpu_loras = max_loras; off without --enable-lora", () => {
    expect(flags({})).toEqual({ ok: true, value: { maxLoras: 1, maxLoraRank: 16, maxCpuLoras: 1, modules: [] } });
    expect(flags({ maxLoras: 3 })).toMatchObject({ ok: true, value: { maxLoras: 3, maxCpuLoras: 3 } });
    expect(loraConfig({ enableLora: false, modules: [], maxLoras: null, maxLoraRank: null, maxCpuLoras: null })).toEqual({ ok: true, value: null });
  });

  test("each check is one line", () => {
    expect(loraConfig({ enableLora: false, modules: ["a=/x"], maxLoras: null, maxLoraRank: null, maxCpuLoras: null })).toEqual({ ok: false, error: "--lora-modules needs --enable-lora" });
    expect(loraConfig({ enableLora: false, modules: [], maxLoras: 2, maxLoraRank: null, maxCpuLoras: null })).toEqual({ ok: false, error: "--max-loras needs --enable-lora" });
    expect(flags({ maxLoraRank: 12 })).toEqual({ ok: false, error: "--max-lora-rank must be one of 1, 8, 16, 32, 64, 128, 256, 320, 512 (got 12)" });
    expect(flags({ maxLoras: 4, maxCpuLoras: 2 })).toEqual({ ok: false, error: "max_cpu_loras (2) must be >= max_loras (4)" });
    expect(flags({ modules: [`a=${HERE}`, `a=${HERE}`] })).toEqual({ ok: false, error: "--lora-modules: the name a is given twice" });
    expect(flags({ modules: ["a=/no/such/adapter.gguf"] })).toEqual({ ok: false, error: "--lora-modules a: no adapter file at /no/such/adapter.gguf" });
  });
});

describe("parseLoraModule", () => {
  test("name=path and vLLM's JSON form with base_model_name", () => {
    expect(parseLoraModule("sql=/a/sql.gguf")).toEqual({ ok: true, value: { name: "sql", path: "/a/sql.gguf", baseModelName: null } });
    expect(parseLoraModule('{"name": "sql", "path": "/a/sql.gguf", "base_model_name": "llama"}')).toEqual({ ok: true, value: { name: "sql", path: "/a/sql.gguf", baseModelName: "llama" } });
    expect(parseLoraModule('{"name": "sql", "path": "/a/sql.gguf"}')).toMatchObject({ ok: true, value: { baseModelName: null } });
  });

  test("malformed entries are one line naming the problem", () => {
    expect(parseLoraModule("sql")).toEqual({ ok: false, error: '--lora-modules: expected name=path or a JSON object, got "sql"' });
    expect(parseLoraModule("=x")).toMatchObject({ ok: false });
    expect(parseLoraModule('{"name": "sql"}')).toEqual({ ok: false, error: '--lora-modules: "{\\"name\\": \\"sql\\"}" needs "name" and "path" strings' });
    expect(parseLoraModule('{"name": "s", "path": "/p", "rank": 8}')).toMatchObject({ ok: false, error: expect.stringContaining("unknown field rank") });
    expect(parseLoraModule("{nope")).toMatchObject({ ok: false, error: expect.stringContaining("--lora-modules: invalid JSON") });
  });
});
