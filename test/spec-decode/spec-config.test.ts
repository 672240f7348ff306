/** --speculative-config parsing: vLLM's keys, defaults and exact error texts; the ngram matcher on vLLM's examples. */
import { describe, expect, test } from "bun:test";
import { parseSpeculativeConfig, speculativeConfigRepr } from "../../src/config/speculative-config.ts";
import { speculativeConfigFromFlags } from "../../src/command-line/speculative-flags.ts";
import { randomInt, rng } from "../helpers/prng.ts";
import { proposeNgram } from "../../src/engine/spec-decode/ngram-proposer.ts";

describe("--speculative-config", () => {
  test("ngram defaults: both bounds 5, or one mirrors the other; dashes read as underscores", () => {
    expect(parseSpeculativeConfig('{"method":"ngram","num_speculative_tokens":4}')).toEqual({ ok: true, value: { method: "ngram", model: null, numSpeculativeTokens: 4, promptLookupMax: 5, promptLookupMin: 5 } });
    expect(parseSpeculativeConfig('{"method":"ngram","num-speculative-tokens":3,"prompt_lookup_max":2}')).toMatchObject({ ok: true, value: { promptLookupMax: 2, promptLookupMin: 2, numSpeculativeTokens: 3 } });
    expect(parseSpeculativeConfig('{"model":"[ngram]","num_speculative_tokens":3,"prompt_lookup_min":2,"prompt_lookup_max":4}')).toMatchObject({ ok: true, value: { method: "ngram", promptLookupMin: 2, promptLookupMax: 4 } });
    expect(parseSpeculativeConfig('{"model":"draft.gguf","num_speculative_tokens":2}')).toMatchObject({ ok: true, value: { method: "draft_model", model: "draft.gguf", promptLookupMax: 0 } });
  });

  test.each([
    ['{"method":"ngram"}', "num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter."],
    ["{}", "num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter."],
    ['{"num_speculative_tokens":3}', "num_speculative_tokens was provided but without speculative model."],
    ['{"model":"d.gguf"}', "A speculative model was provided, but `num_speculative_tokens` was not provided"],
    ['{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":4,"prompt_lookup_max":2}', "prompt_lookup_min=4 must be <= prompt_lookup_max=2"],
    ['{"method":"ngram","num_speculative_tokens":3,"tensor_parallel_size":1}', "'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass 'draft_tensor_parallel_size' instead."],
    ['{"method":"ngram","num_speculative_tokens":3,"draft_tensor_parallel_size":2}', "speculative_draft_tensor_parallel_size=2 cannot be other value than 1 or target model tensor_parallel_size"],
    ['{"method":"banana","num_speculative_tokens":3}', "Unsupported speculative method: 'banana'"],
    ['{"method":"ngram","num_speculative_tokens":0}', "SpeculativeConfig: num_speculative_tokens: Input should be greater than 0 (got 0)"],
    ['{"method":"ngram","num_speculative_tokens":3,"foo":1}', "SpeculativeConfig: foo: Extra inputs are not permitted"],
  ])("%s -> vLLM's error", (json, message) => {
    expect(parseSpeculativeConfig(json)).toEqual({ ok: false, error: message });
  });

  test("methods and knobs fennec cannot honour are refused, never ignored", () => {
    for (const json of [
      '{"method":"ngram_gpu","num_speculative_tokens":3}', '{"method":"eagle","model":"x","num_speculative_tokens":3}',
      '{"method":"ngram","num_speculative_tokens":3,"suffix_decoding_max_tree_depth":8}',
      '{"method":"ngram","num_speculative_tokens":3,"rejection_sample_method":"synthetic"}',
      '{"model":"d.gguf","num_speculative_tokens":3,"draft_sample_method":"probabilistic"}',
      '{"model":"d.gguf","num_speculative_tokens":3,"quantization":"fp8"}', "not json", "[1]",
    ]) {
      const r = parseSpeculativeConfig(json);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.length).toBeGreaterThan(10);
    }
  });

  test("the shortcut flags set the keys and clash with the same key in the JSON", () => {
    expect(speculativeConfigFromFlags({ "spec-method": "ngram", "spec-tokens": 2 })).toMatchObject({ ok: true, value: { method: "ngram", numSpeculativeTokens: 2 } });
    expect(speculativeConfigFromFlags({ "speculative-config": '{"method":"ngram","num_speculative_tokens":2}', "spec-method": "ngram" }))
      .toEqual({ ok: false, error: "--spec-method and --speculative-config['method'] are mutually exclusive" });
    expect(speculativeConfigFromFlags({})).toEqual({ ok: true, value: null });
  });

  test("start-up repr as vLLM prints it", () => {
    const c = parseSpeculativeConfig('{"method":"ngram","num_speculative_tokens":4}');
    if (!c.ok) throw new Error(c.error);
    expect(speculativeConfigRepr(c.value)).toBe("SpeculativeConfig(method='ngram', model=None, num_spec_tokens=4)");
    const d = parseSpeculativeConfig('{"model":"/m/d.gguf","num_speculative_tokens":2}');
    if (!d.ok) throw new Error(d.error);
    expect(speculativeConfigRepr(d.value)).toBe("SpeculativeConfig(method='draft_model', model='/m/d.gguf', num_spec_tokens=2)");
  });
});

/** the matcher written the slow, obvious way: n from max down to min, first (earliest) start position */
function slowNgram(ctx: number[], minN: number, maxN: number, k: number): number[] {
  for (let n = maxN; n >= minN; n--) {
    if (ctx.length < n + 1) continue;
    const suffix = ctx.slice(ctx.length - n);
    for (let start = 0; start + n < ctx.length; start++) {
      if (suffix.every((t, j) => ctx[start + j] === t)) return ctx.slice(start + n, Math.min(start + n + k, ctx.length));
    }
  }
  return [];
}

describe("ngram proposer (vLLM NgramProposer)", () => {
  test("vLLM's docstring example and edge cases", () => {
    expect(proposeNgram([1, 2, 3, 4, 2, 3], 2, 3, 4)).toEqual([4, 2, 3]);
    expect(proposeNgram([1, 2, 3, 4, 5], 1, 3, 4)).toEqual([]); // nothing repeats
    expect(proposeNgram([7, 7, 7, 7], 2, 2, 3)).toEqual([7, 7]); // earliest occurrence overlaps the suffix; cut at the end
    expect(proposeNgram([1, 2, 9, 1, 2, 8, 1, 2], 2, 2, 1)).toEqual([9]); // earliest of equally long matches
    expect(proposeNgram([5, 1, 2, 3, 6, 2, 3, 7, 1, 2, 3], 1, 3, 2)).toEqual([6, 2]); // the longest match wins over an earlier shorter one
    expect(proposeNgram([1, 2], 3, 5, 4)).toEqual([]); // shorter than min
  });

  test("equals the n-from-max-down search on random contexts", () => {
    const random = rng(12345);
    const rand = (m: number): number => randomInt(random, m);
    for (let trial = 0; trial < 400; trial++) {
      const ctx = Array.from({ length: 5 + rand(60) }, () => rand(4));
      const minN = 1 + rand(3);
      const maxN = minN + rand(4);
      const k = 1 + rand(6);
      expect(proposeNgram(ctx, minN, maxN, k)).toEqual(slowNgram(ctx, minN, maxN, k));
    }
  });
});
