/** --stage-config: the shipped example loads; every bad config is one line naming the file, the stage and the problem. */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadStageConfig, pdChain, remoteStageProblem } from "../../src/pipeline/stage-config.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-stage-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, "a.gguf"), "x");
writeFileSync(join(dir, "b.gguf"), "y");

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe("stage configs", () => {
  test("examples/three-stage.yaml: prefill -(kv_blocks)-> decode -(text)-> rewrite", () => {
    const chain = loadStageConfig(join(import.meta.dir, "../../examples/three-stage.yaml"));
    if (!chain.ok) throw new Error(chain.error);
    expect(chain.value.stages.map((s) => [s.stageId, s.input, s.finalOutput])).toEqual([[0, null, false], [1, "kv_blocks", false], [2, "text", true]]);
  });

  test("JSON works too, model paths are relative to the file", () => {
    const path = write("two.json", JSON.stringify({ stage_args: [{ stage_id: 0, engine_args: { model: "a.gguf", max_num_seqs: 2 } }, { stage_id: 1, input_type: "text", engine_args: { model: "b.gguf" }, default_sampling_params: { temperature: 0, max_tokens: 3 } }] }));
    const chain = loadStageConfig(path);
    if (!chain.ok) throw new Error(chain.error);
    expect(chain.value.stages[0]!.engineArgs.model).toBe(join(dir, "a.gguf"));
    expect(chain.value.stages[0]!.engineArgs.maxNumSeqs).toBe(2);
    expect(chain.value.stages[1]!.samplingOverrides).toEqual({ temperature: 0, maxTokens: 3 });
  });

  test("a remote prefill stage 0 (url) and a local decode stage 1; it needs the local engines to be NixlConnector consumers", () => {
    const chain = loadStageConfig(write("remote.yaml", "stage_args:\n  - stage_id: 0\n    url: http://10.0.0.1:8100/v1/\n  - stage_id: 1\n    input_type: kv_blocks\n"));
    if (!chain.ok) throw new Error(chain.error);
    expect(chain.value.stages.map((s) => [s.url ?? null, s.input])).toEqual([["http://10.0.0.1:8100", null], [null, "kv_blocks"]]);
    expect(remoteStageProblem(chain.value, "kv_consumer")).toBeNull();
    expect(remoteStageProblem(chain.value, "kv_both")).toBeNull();
    expect(remoteStageProblem(chain.value, null)).toMatch(/remote\.yaml: stage 0 runs at http:\/\/10\.0\.0\.1:8100: start with --kv-transfer-config '\{"kv_connector":"NixlConnector","kv_role":"kv_consumer"\}'/);
    expect(remoteStageProblem(chain.value, "kv_producer")).toContain("kv_producer only serves blocks");
    expect(remoteStageProblem(pdChain(), null)).toBeNull();
  });

  test("pd is a two-stage KV chain", () => {
    expect(pdChain().stages.map((s) => s.input)).toEqual([null, "kv_blocks"]);
  });

  const BAD: readonly (readonly [string, string, RegExp])[] = [
    ["unknown-key.yaml", "stage_args:\n  - stage_id: 0\n  - stage_id: 1\n    input_typ: text\n", /unknown-key\.yaml: stage 1: unknown key "input_typ"/],
    ["unknown-engine-arg.yaml", "stage_args:\n  - stage_id: 0\n    engine_args:\n      gpu_memory_utilization: 0.9\n", /stage 0: unknown engine_args key "gpu_memory_utilization"/],
    ["unknown-top.yaml", "stages: []\n", /unknown-top\.yaml: unknown top-level key "stages"/],
    ["missing-model.yaml", "stage_args:\n  - stage_id: 0\n    engine_args:\n      model: nope.gguf\n", /missing-model\.yaml: stage 0: model file not found: .*nope\.gguf/],
    ["kv-two-models.yaml", "stage_args:\n  - stage_id: 0\n    engine_args: {model: a.gguf}\n  - stage_id: 1\n    input_type: kv_blocks\n    engine_args: {model: b.gguf}\n", /kv-two-models\.yaml: stage 1: input_type kv_blocks needs the same model as stage 0/],
    ["kv-block-size.yaml", "stage_args:\n  - stage_id: 0\n    engine_args: {block_size: 16}\n  - stage_id: 1\n    input_type: kv_blocks\n    engine_args: {block_size: 32}\n", /stage 1: input_type kv_blocks needs the same block_size/],
    ["kv-max-tokens.yaml", "stage_args:\n  - stage_id: 0\n    default_sampling_params: {max_tokens: 5}\n  - stage_id: 1\n    input_type: kv_blocks\n", /stage 0: max_tokens cannot be set on a stage whose KV blocks go to stage 1/],
    ["bad-edge.yaml", "stage_args:\n  - stage_id: 0\n  - stage_id: 1\n    input_type: latent\n", /stage 1: input_type must be one of kv_blocks, text/],
    ["fan-in.yaml", "stage_args:\n  - stage_id: 0\n  - stage_id: 1\n  - stage_id: 2\n    engine_input_source: [0, 1]\n", /stage 2: engine_input_source must be \[1\]/],
    ["order.yaml", "stage_args:\n  - stage_id: 1\n", /order\.yaml: stage 0: stage_id must be 0/],
    ["stage0-input.yaml", "stage_args:\n  - stage_id: 0\n    input_type: text\n", /stage 0: stage 0 reads the request/],
    ["final.yaml", "stage_args:\n  - stage_id: 0\n    final_output: true\n  - stage_id: 1\n", /stage 0: final_output must be false/],
    ["diffusion.yaml", "stage_args:\n  - stage_id: 0\n    stage_type: diffusion\n", /stage 0: stage_type "diffusion" is not supported/],
    ["bad-device.yaml", "stage_args:\n  - stage_id: 0\n    engine_args: {device: tpu}\n", /stage 0: engine_args\.device must be one of cpu, webgpu/],
    ["bad-int.yaml", "stage_args:\n  - stage_id: 0\n    engine_args: {max_num_seqs: -1}\n", /stage 0: engine_args\.max_num_seqs must be a positive integer/],
    ["bad-sampling.yaml", "stage_args:\n  - stage_id: 0\n    default_sampling_params: {temperature: hot}\n", /stage 0: default_sampling_params\.temperature must be a number/],
    ["not-yaml.yaml", "stage_args: [\n", /not-yaml\.yaml: not valid YAML or JSON: .*[^:]$/],
    ["not-yaml-flow.yaml", "stages: [\n", /not-yaml-flow\.yaml: not valid YAML or JSON: .*line 2, column 1$/],
    ["empty.yaml", "stage_args: []\n", /empty\.yaml: stage_args must be a non-empty list/],
    // a stage in another process (url): stage 0 only, a prefill server whose blocks the local stage 1 pulls
    ["url-stage1.yaml", "stage_args:\n  - stage_id: 0\n  - stage_id: 1\n    input_type: kv_blocks\n    url: http://127.0.0.1:8100\n", /url-stage1\.yaml: stage 1: url \(a stage in another process\) is supported on stage 0 only/],
    ["url-text-edge.yaml", "stage_args:\n  - stage_id: 0\n    url: http://127.0.0.1:8100\n  - stage_id: 1\n    input_type: text\n", /url-text-edge\.yaml: stage 1: the stage after one in another process \(url\) must take its KV blocks/],
    ["url-alone.yaml", "stage_args:\n  - stage_id: 0\n    url: http://127.0.0.1:8100\n", /url-alone\.yaml: stage 1: .*add a local decode stage 1/],
    ["url-engine-args.yaml", "stage_args:\n  - stage_id: 0\n    url: http://127.0.0.1:8100\n    engine_args: {max_num_seqs: 2}\n  - stage_id: 1\n    input_type: kv_blocks\n", /stage 0: engine_args cannot be set on a stage in another process \(url\)/],
    ["url-scheme.yaml", "stage_args:\n  - stage_id: 0\n    url: ftp://127.0.0.1:8100\n  - stage_id: 1\n    input_type: kv_blocks\n", /stage 0: url must be http:\/\/ or https:\/\//],
    ["url-garbage.yaml", "stage_args:\n  - stage_id: 0\n    url: 8100\n  - stage_id: 1\n    input_type: kv_blocks\n", /stage 0: url must be the prefill server's base URL/],
    // 100k nested brackets overflowed the YAML parser's stack ("Maximum call stack size exceeded")
    ["deep.json", `{"stage_args": ${"[".repeat(100_000)}${"]".repeat(100_000)}}`, /deep\.json: refused: nesting is deeper than the limit of 32 levels/],
    ["deep-flow.yaml", `stage_args:\n  - stage_id: 0\n    default_sampling_params: {stop: ${"[".repeat(50_000)}}\n`, /deep-flow\.yaml: refused: nesting is deeper than the limit of 32/],
    // 1,000 stages started 1,000 engine Workers
    ["many.yaml", `stage_args:\n${Array.from({ length: 1000 }, (_, i) => `  - stage_id: ${i}\n`).join("")}`, /many\.yaml: stage_args has 1000 stages, more than the limit of 16/],
    ["huge.yaml", `# ${"x".repeat(2 * 1024 * 1024)}\nstage_args: [{stage_id: 0}]\n`, /huge\.yaml: the file is \d+ bytes, more than a stage config's limit of 1048576/],
    ["long-value.yaml", `stage_args:\n  - stage_id: 0\n    default_sampling_params: {stop: [${Array.from({ length: 100_000 }, () => "1").join(",")}]}\n`, /stop must be a list of strings \(got \[1,1,1.*\.\.\.\)$/],
  ];

  test.each(BAD)("%s fails with one line", (name, text, expected) => {
    const result = loadStageConfig(write(name, text));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error).toMatch(expected);
    expect(result.error).not.toContain("\n");
    expect(result.error).toContain(name);
  });

  test("brackets inside quoted strings and comments do not count as nesting", () => {
    const deepText = "[".repeat(200);
    const path = write("quoted.yaml", `# ${deepText}\nstage_args:\n  - stage_id: 0\n    default_sampling_params: {stop: ["${deepText}", '${deepText}']}\n`);
    const chain = loadStageConfig(path);
    if (!chain.ok) throw new Error(chain.error);
    expect(chain.value.stages[0]!.samplingOverrides.stop).toEqual([deepText, deepText]);
  });

  test("a missing config file", () => {
    const result = loadStageConfig(join(dir, "absent.yaml"));
    expect(result.ok ? "" : result.error).toBe(`--stage-config: file not found: ${join(dir, "absent.yaml")}`);
  });
});
