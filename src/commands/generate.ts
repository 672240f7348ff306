/**
 * `fennec generate`: one prompt, one sequence, in-process on the model runner (no engine, no server), on the backend
 * --device / --threads choose.
 * Greedy at temperature 0, otherwise seeded temperature sampling (the engine's sampler). `--json` prints exactly
 * `{"token_ids": [...], "text": "..."}` with the generated ids only; otherwise the prompt and the continuation are
 * streamed as text.
 */
import { generateConfig, type GenerateConfig } from "../command-line/generate-config.ts";
import type { Options } from "../command-line/flags.ts";
import { createRng } from "../engine/rng.ts";
import { Sampler, type SamplingContext } from "../engine/sampler.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../engine/sampling-params.ts";
import { decodeTokens } from "../model/decode-loop.ts";
import { loadModel } from "../model/load-model.ts";
import { Runner } from "../model/runner.ts";
import { createTokenizer } from "../tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { createBackend, type BackendOptions } from "../backend/create-backend.ts";
import { openModelGguf } from "../gguf/model-source.ts";
import { createProgressBar } from "../util/progress.ts";
import { errorMessage } from "../util/error-message.ts";
import type { ModelRunner } from "../model/model-batch.ts";
import { EngineCore } from "../engine/engine-core.ts";
import { checkDraftVocabulary } from "../engine/spec-decode/draft-model-proposer.ts";
import type { GgufFile } from "../gguf/gguf-file.ts";
import { KEY } from "../gguf/names.ts";
import { speculativeConfigNote, speculativeConfigRepr, type SpeculativeConfig } from "../config/speculative-config.ts";

/** The one place generate picks its backend, as the engine does: --device cpu = the WASM kernels on --threads threads. */
function backendOptions(config: GenerateConfig): BackendOptions {
  if (config.device === "webgpu") return { kind: "webgpu" };
  return { kind: "wasm", threads: config.threads ?? undefined };
}

/**
 * logits -> token with the engine's own sampler and per-request generator (vLLM semantics, temperature < 1e-5 is
 * greedy), so `generate --seed N` draws what a served request with seed N draws.
 */
function createPick(temperature: number, seed: number, promptIds: readonly number[], stopIds: readonly number[]): (logits: Float32Array) => number {
  const sampler = new Sampler();
  const allTokenIds = [...promptIds];
  const outputCounts = new Map<number, number>();
  const context: SamplingContext = {
    params: { ...DEFAULT_SAMPLING_PARAMS, temperature, seed, maxTokens: null }, allTokenIds, numPromptTokens: promptIds.length,
    outputCounts, stopTokenIds: stopIds, rng: createRng(seed),
  };
  return (logits) => {
    const { tokenId } = sampler.sample(logits, context);
    allTokenIds.push(tokenId);
    outputCounts.set(tokenId, (outputCounts.get(tokenId) ?? 0) + 1);
    return tokenId;
  };
}

/**
 * With --speculative-config: the one sequence runs on an in-process engine (the scheduler, the proposer and the
 * rejection sampler of `serve`), sized for exactly this request; yields tokens as steps emit them.
 */
async function* speculativeTokens(runner: ModelRunner, draftRunner: ModelRunner | null, ids: readonly number[], spec: SpeculativeConfig, o: { maxTokens: number; temperature: number; seed: number; stopIds: readonly number[] }): AsyncGenerator<number> {
  const maxModelLen = runner.config.contextLength;
  const maxTokens = Math.min(o.maxTokens, maxModelLen - ids.length);
  if (maxTokens <= 0) return;
  const blockSize = 16;
  const numBlocks = Math.ceil((ids.length + maxTokens + spec.numSpeculativeTokens + 1) / blockSize);
  const engine = new EngineCore(runner, {
    maxNumSeqs: 1, maxNumBatchedTokens: Math.max(512, spec.numSpeculativeTokens + 1), maxModelLen, blockSize, numBlocks, enablePrefixCaching: false, speculative: spec,
  }, 0, undefined, o.seed, { draftRunner });
  const error = engine.addRequest({
    requestId: "generate", promptTokenIds: ids, arrivalMs: 0, eosTokenIds: o.stopIds,
    sampling: { ...DEFAULT_SAMPLING_PARAMS, temperature: o.temperature, seed: o.seed, maxTokens },
  });
  if (error) throw new CliError(error.message);
  while (engine.hasWork()) {
    const result = await engine.step();
    for (const d of result?.deltas ?? []) yield* d.newTokenIds;
  }
}

/** method draft_model: the draft GGUF on its own backend, with the engine's vocabulary check */
async function loadDraft(spec: SpeculativeConfig, target: ModelRunner, targetGguf: GgufFile, options: BackendOptions): Promise<ModelRunner | null> {
  if (spec.method !== "draft_model" || spec.model === null) return null;
  const file = await openModelGguf(spec.model);
  if (!file.ok) throw new RuntimeFailure(`speculative draft model: ${file.error}`);
  const model = loadModel(file.value);
  if (!model.ok) throw new RuntimeFailure(`speculative draft model: ${model.error}`);
  const tokensOf = (g: GgufFile): string[] | null => {
    const v = g.metadata.get(KEY.tokens)?.value;
    return Array.isArray(v) && v.every((t) => typeof t === "string") ? (v as string[]) : null;
  };
  const same = checkDraftVocabulary(target.config, model.value.config, tokensOf(targetGguf), tokensOf(file.value));
  if (!same.ok) throw new RuntimeFailure(same.error);
  return new Runner(model.value.config, model.value.weights, await createBackend(options));
}

function promptIds(tokenizer: Tokenizer, prompt: string): number[] {
  const bos = tokenizer.bosId;
  if (prompt === "") {
    if (bos === null) throw new CliError("this model has no BOS token: give a --prompt");
    return [bos];
  }
  const ids = tokenizer.encode(prompt, { addSpecial: true, parseSpecial: false });
  if (ids.length === 0) throw new CliError("the prompt encodes to no tokens");
  return ids;
}

export async function main(options: Options): Promise<number> {
  const parsed = generateConfig(options);
  if (!parsed.ok) throw new CliError(parsed.error);
  const config = parsed.value;
  const { prompt, maxTokens, temperature, json } = config;
  const seed = config.seed ?? Date.now();
  const speculative = config.speculative;
  if (speculative !== null) {
    const note = speculativeConfigNote(speculative);
    if (note !== null) process.stderr.write(`fennec: ${note}\n`);
    process.stderr.write(`fennec: speculative_config=${speculativeConfigRepr(speculative)}\n`);
  }
  // ranges (--max-tokens >= 0, --temperature >= 0, --threads 1..256) are checked by the flag table in command-line/flags.ts
  const file = await openModelGguf(config.model);
  if (!file.ok) throw new RuntimeFailure(file.error);
  const gguf = file.value;
  const model = loadModel(gguf);
  if (!model.ok) throw new RuntimeFailure(model.error);
  let tokenizer: Tokenizer;
  try {
    tokenizer = createTokenizer(gguf);
  } catch (e) {
    throw new CliError(`${gguf.source}: cannot build the tokenizer (${errorMessage(e)})`);
  }
  const ids = promptIds(tokenizer, prompt);
  if (ids.length > model.value.config.contextLength) {
    throw new CliError(`the prompt has ${ids.length} tokens, more than the model's context length ${model.value.config.contextLength}`);
  }

  let backend: Awaited<ReturnType<typeof createBackend>>;
  try {
    backend = await createBackend(backendOptions(config));
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(errorMessage(e)); // e.g. no WebGPU adapter: one line, exit 2
  }
  const progress = createProgressBar(`loading ${model.value.config.name}`);
  const runner = new Runner(model.value.config, model.value.weights, backend, (done, total) => progress.update(done, total));
  progress.done();

  const generated: number[] = [];
  const detokenizer = tokenizer.createDetokenizer({ skipSpecialTokens: true });
  if (!json) process.stdout.write(prompt);
  // from BOS, a SentencePiece first piece's space prefix is not text: drop it where decode() drops it
  let atStart = prompt === "";
  const pick = createPick(temperature, seed, ids, tokenizer.stopIds);
  const stream = speculative !== null
    ? speculativeTokens(runner, await loadDraft(speculative, runner, gguf, backendOptions(config)), ids, speculative, { maxTokens, temperature, seed, stopIds: tokenizer.stopIds })
    : decodeTokens(runner, ids, { maxTokens, stopIds: tokenizer.stopIds, pick });
  for await (const id of stream) {
    generated.push(id);
    let piece = detokenizer.push([id]);
    if (atStart && piece !== "") {
      if (piece.startsWith(" ") && !tokenizer.decode(generated, { skipSpecialTokens: true }).startsWith(" ")) piece = piece.slice(1);
      atStart = false;
    }
    if (!json) process.stdout.write(piece);
  }
  const tail = detokenizer.flush();
  runner.dispose();

  if (json) {
    process.stdout.write(`${JSON.stringify({ token_ids: generated, text: tokenizer.decode(generated, { skipSpecialTokens: true }) })}\n`);
  } else {
    process.stdout.write(`${tail}\n`);
  }
  return 0;
}
