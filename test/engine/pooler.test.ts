/**
 * Pooling rules: --pooler-config parsing (vLLM's PoolerConfig keys, refusals), runner resolution against the GGUF's
 * pooling type, the serve flags that carry them, and the pooler's arithmetic over prefill chunks (a prompt pooled in
 * chunks equals the prompt pooled whole; a recompute from position 0 starts over).
 */
import { describe, expect, test } from "bun:test";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { serveConfig } from "../../src/command-line/serve-config.ts";
import { parseHfOverrides, parsePoolerConfig } from "../../src/config/pooler-config.ts";
import { resolvePooler } from "../../src/engine/resolve-pooler.ts";
import { embeddingOf, SequencePooler } from "../../src/engine/pooler.ts";

const MODEL = { dim: 4, name: "m" };

describe("--pooler-config", () => {
  test("vLLM's keys; null means the model's default", () => {
    expect(parsePoolerConfig('{"pooling_type": "MEAN", "normalize": false, "dimensions": null}')).toEqual({ ok: true, value: { poolingType: "MEAN", normalize: false, dimensions: null } });
    expect(parsePoolerConfig("{}")).toEqual({ ok: true, value: { poolingType: null, normalize: null, dimensions: null } });
  });
  test.each([
    ["[1]", "must be a JSON object"],
    ['{"pooling_type": "ALL"}', "pooling_type ALL (per-token outputs) is not supported"],
    ['{"pooling_type": "mean"}', "pooling_type must be one of LAST, MEAN, CLS"],
    ['{"normalize": "yes"}', "normalize must be true or false"],
    ['{"dimensions": 0}', "dimensions must be a positive integer"],
    ['{"softmax": true}', "softmax is not supported by fennec"],
    ['{"enable_chunked_processing": true}', "enable_chunked_processing is not supported"],
    ['{"pooling": "LAST"}', 'unknown key "pooling"'],
  ])("%s is refused: %s", (raw, message) => {
    const r = parsePoolerConfig(raw);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain(message);
  });
});

describe("--hf-overrides (the matryoshka keys)", () => {
  test("is_matryoshka / matryoshka_dimensions make the model matryoshka, as vLLM's ModelConfig reads them", () => {
    expect(parseHfOverrides('{"is_matryoshka": true}')).toEqual({ ok: true, value: { dimensions: null } });
    expect(parseHfOverrides('{"matryoshka_dimensions": [2, 4]}')).toEqual({ ok: true, value: { dimensions: [2, 4] } });
    expect(parseHfOverrides('{"is_matryoshka": false}')).toEqual({ ok: true, value: null });
    const resolved = resolvePooler("pooling", MODEL, { poolingType: null, normalize: null, dimensions: 2 }, { dimensions: [2, 4] });
    expect(resolved).toMatchObject({ ok: true, value: { dimensions: 2, matryoshka: { dimensions: [2, 4] } } });
  });
  test.each([
    ['{"rope_scaling": {}}', '"rope_scaling" is not supported'],
    ['{"matryoshka_dimensions": [0]}', "matryoshka_dimensions must be a list of positive integers"],
    ["true", "--hf-overrides must be a JSON object"],
  ])("%s is refused: %s", (raw, message) => {
    const r = parseHfOverrides(raw);
    expect(r.ok ? "" : r.error).toContain(message);
  });
  test("a matryoshka size past the hidden size, or on a generative model, is refused", () => {
    const big = resolvePooler("pooling", MODEL, null, { dimensions: [8] });
    expect(big.ok ? "" : big.error).toContain("larger than the model's hidden size 4");
    const generative = resolvePooler("auto", MODEL, null, { dimensions: null });
    expect(generative.ok ? "" : generative.error).toContain("add --runner pooling");
  });
});

describe("runner resolution", () => {
  test("auto pools when the GGUF has mean / cls / last, generates otherwise; --pooler-config wins over the GGUF", () => {
    expect(resolvePooler("auto", { ...MODEL, poolingType: "mean" }, null)).toMatchObject({ ok: true, value: { poolingType: "MEAN", normalize: true, source: "gguf" } });
    expect(resolvePooler("auto", { ...MODEL }, null)).toEqual({ ok: true, value: null });
    expect(resolvePooler("auto", { ...MODEL, poolingType: "none" }, null)).toEqual({ ok: true, value: null });
    expect(resolvePooler("generate", { ...MODEL, poolingType: "last" }, null)).toEqual({ ok: true, value: null });
    expect(resolvePooler("pooling", { ...MODEL }, null)).toMatchObject({ ok: true, value: { poolingType: "LAST", source: "default" } });
    expect(resolvePooler("auto", { ...MODEL, poolingType: "last" }, { poolingType: "CLS", normalize: false, dimensions: null })).toMatchObject({ ok: true, value: { poolingType: "CLS", normalize: false, source: "--pooler-config" } });
  });
  test("rank (rerankers), --pooler-config on a generative model and dimensions without matryoshka are refused", () => {
    expect(resolvePooler("auto", { ...MODEL, poolingType: "rank" }, null).ok).toBe(false);
    const generative = resolvePooler("auto", { ...MODEL }, { poolingType: "MEAN", normalize: null, dimensions: null });
    expect(generative.ok ? "" : generative.error).toContain("add --runner pooling");
    const dims = resolvePooler("pooling", { ...MODEL }, { poolingType: null, normalize: null, dimensions: 2 });
    expect(dims.ok ? "" : dims.error).toContain('Model "m" does not support matryoshka representation');
  });
  test("serve flags: --runner pooling, --convert embed, --pooler-config reach the engine arguments; bad ones are one line", () => {
    const config = (argv: string[]) => {
      const parsed = parseCommandArgs("serve", argv);
      if (!parsed.ok) return parsed;
      return serveConfig(parsed.value, {});
    };
    const pooling = config(["--runner", "pooling", "--pooler-config", '{"pooling_type": "MEAN"}', "--hf-overrides", '{"is_matryoshka": true}']);
    expect(pooling.ok && pooling.value.engine).toMatchObject({ runner: "pooling", poolerConfig: { poolingType: "MEAN" }, matryoshka: { dimensions: null } });
    const convert = config(["--convert", "embed"]);
    expect(convert.ok && convert.value.engine.runner).toBe("pooling");
    const task = config(["--task", "embed"]);
    expect(task.ok && task.value.engine.runner).toBe("pooling");
    expect(config([]).ok && (config([]) as { value: { engine: { runner?: string } } }).value.engine.runner).toBe("auto");
    const refused: [string[], string][] = [
      [["--convert", "classify"], "--convert classify is not supported"],
      [["--task", "score"], "--task score is not supported"],
      [["--task", "embed", "--runner", "generate"], "--task embed makes a pooling model"],
      [["--runner", "generate", "--pooler-config", "{}"], "--pooler-config needs a pooling model"],
      [["--pooler-config", "nope"], "--pooler-config must be a JSON object"],
      [["--runner", "draft"], "draft"],
      [["--hf-overrides", '{"architectures": ["X"]}'], '"architectures" is not supported'],
    ];
    for (const [argv, message] of refused) {
      const r = config(argv);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error).toContain(message);
    }
  });
});

describe("SequencePooler", () => {
  const rows = (values: number[][]): Float32Array => Float32Array.from(values.flat());
  const prompt = [[1, 2, 3, 4], [5, 6, 7, 8], [-1, 0, 2, 1], [3, 3, 3, 3], [0, 1, 0, 1]];

  test.each(["LAST", "MEAN", "CLS"] as const)("%s over chunks equals %s over the whole prompt", (type) => {
    const whole = new SequencePooler(type, 4);
    whole.add(rows(prompt), 0);
    const chunked = new SequencePooler(type, 4);
    chunked.add(rows(prompt.slice(0, 2)), 0);
    chunked.add(rows(prompt.slice(2, 3)), 2);
    chunked.add(rows(prompt.slice(3)), 3);
    expect(Array.from(chunked.pooled())).toEqual(Array.from(whole.pooled()));
    const expected = type === "LAST" ? prompt[4]! : type === "CLS" ? prompt[0]! : [8 / 5, 12 / 5, 15 / 5, 17 / 5];
    expect(Array.from(whole.pooled())).toEqual(expected.map(Math.fround));
  });

  test("a recompute from position 0 (after a preemption) forgets the first pass", () => {
    const p = new SequencePooler("MEAN", 4);
    p.add(rows(prompt.slice(0, 3)), 0);
    p.add(rows(prompt), 0);
    const whole = new SequencePooler("MEAN", 4);
    whole.add(rows(prompt), 0);
    expect(Array.from(p.pooled())).toEqual(Array.from(whole.pooled()));
  });

  test("embeddingOf: matryoshka cut before the L2 norm; a zero vector stays zero", () => {
    expect(Array.from(embeddingOf(Float32Array.of(3, 4, 12), 2, true))).toEqual([0.6, 0.8].map(Math.fround));
    expect(Array.from(embeddingOf(Float32Array.of(3, 4, 12), null, false))).toEqual([3, 4, 12]);
    expect(Array.from(embeddingOf(new Float32Array(3), null, true))).toEqual([0, 0, 0]);
  });
});
