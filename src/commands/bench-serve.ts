/**
 * `fennec bench serve`: vLLM's online benchmark (vllm/benchmarks/serve.py, lib/endpoint_request_func.py) against any
 * OpenAI-compatible server: streams each prompt of the dataset at the configured rate and concurrency, times the
 * chunks as vLLM does (first chunk with choices = TTFT, the gaps after it = ITL, usage = token counts), prints vLLM's
 * result block and saves vLLM's JSON keys. The API key comes from --api-key or $OPENAI_API_KEY, as in vLLM.
 */
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { benchServeConfig, keyValuePairs, type BenchServeConfig } from "../command-line/bench-serve-config.ts";
import type { Options } from "../command-line/flags.ts";
import { createRng, type Rng } from "../engine/rng.ts";
import { openModelGguf } from "../gguf/model-source.ts";
import { createTokenizer } from "../tokenizer/gguf-tokenizer.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { errorMessage } from "../util/error-message.ts";
import { createProgressBar } from "../util/progress.ts";
import { randomDataset, shareGptDataset, type BenchPrompt } from "./bench-dataset.ts";
import { fetchSpecDecodeCounters, specDecodeReport } from "./bench-spec-decode.ts";
import { calculateMetrics, defaultResultFilename, resultBlock, resultJson, type RequestOutput } from "./bench-serve-result.ts";


/** One streamed request, timed as vLLM's async_request_openai_completions / _chat_completions do. */
export async function sendRequest(config: BenchServeConfig, model: string, prompt: BenchPrompt, requestId: string, benchStartMs: number): Promise<RequestOutput> {
  const chat = config.backend === "openai-chat";
  const body: Record<string, unknown> = {
    model, ...(chat ? { messages: [{ role: "user", content: prompt.prompt }], max_completion_tokens: prompt.outputLen } : { prompt: prompt.prompt, max_tokens: prompt.outputLen }),
    stream: true, stream_options: { include_usage: true }, ...config.sampling, ...(config.ignoreEos ? { ignore_eos: true } : {}), ...config.extraBody,
  };
  const st = performance.now();
  let mostRecent = st;
  let ttft = 0;
  let first = false;
  const itl: number[] = [];
  let text = "";
  let outputTokens: number | null = null;
  let promptLen = prompt.promptIds.length;
  const fail = (error: string): RequestOutput => ({ success: false, promptLen, outputTokens: 0, ttft, itl, latency: 0, startTime: (st - benchStartMs) / 1000, generatedText: text, error });
  try {
    const res = await fetch(config.url, { method: "POST", headers: { ...config.headers, "x-request-id": requestId }, body: JSON.stringify(body) });
    if (res.status !== 200 || res.body === null) return fail(`${res.status} ${res.statusText}: ${(await res.text()).slice(0, 300)}`);
    const decoder = new TextDecoder();
    let buffer = "";
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      for (const raw of lines) {
        const line = raw.trim();
        if (line === "" || line.startsWith(":")) continue;
        const data = line.startsWith("data:") ? line.slice(5).trim() : line;
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data) as { choices?: { text?: string; delta?: { content?: string | null } }[]; usage?: { completion_tokens?: number; prompt_tokens?: number }; error?: { message?: string } };
        if (chunk.error) return fail(chunk.error.message ?? JSON.stringify(chunk.error));
        const now = performance.now();
        if (chunk.choices && chunk.choices.length > 0) {
          if (!first) {
            first = true;
            ttft = (now - st) / 1000;
          } else {
            itl.push((now - mostRecent) / 1000);
          }
          mostRecent = now;
          text += (chat ? chunk.choices[0]!.delta?.content : chunk.choices[0]!.text) ?? "";
        } else if (chunk.usage) {
          outputTokens = chunk.usage.completion_tokens ?? null;
          if (typeof chunk.usage.prompt_tokens === "number") promptLen = chunk.usage.prompt_tokens;
        }
      }
    }
  } catch (e) {
    return fail(errorMessage(e));
  }
  if (!first) return fail("Never received a valid chunk to calculate TTFT.This response will be marked as failed!");
  return {
    success: true, promptLen, outputTokens: outputTokens ?? -1, ttft, itl, latency: (mostRecent - st) / 1000,
    startTime: (st - benchStartMs) / 1000, generatedText: text, error: "",
  };
}

/** Gamma(shape, scale) by Marsaglia and Tsang (vLLM draws np.random.gamma(burstiness, 1/(rate*burstiness))). */
function gamma(rng: Rng, shape: number, scale: number): number {
  if (shape < 1) return gamma(rng, shape + 1, scale) * Math.pow(1 - rng.nextFloat(), 1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    const x = Math.sqrt(-2 * Math.log(1 - rng.nextFloat())) * Math.cos(2 * Math.PI * rng.nextFloat());
    const v = (1 + c * x) ** 3;
    if (v <= 0) continue;
    const u = 1 - rng.nextFloat();
    if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v * scale;
  }
}

async function firstModel(config: BenchServeConfig): Promise<string> {
  try {
    const res = await fetch(`${config.baseUrl}/v1/models`, { headers: config.headers });
    if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
    const id = ((await res.json()) as { data?: { id?: string }[] }).data?.[0]?.id;
    if (typeof id !== "string") throw new Error("no model listed");
    return id;
  } catch (e) {
    throw new RuntimeFailure(`cannot read ${config.baseUrl}/v1/models (${errorMessage(e)}): is the server up? give --base-url, or --model`);
  }
}

const twoDigits = (n: number): string => String(n).padStart(2, "0");
function dateStamp(d: Date): string {
  return `${d.getFullYear()}${twoDigits(d.getMonth() + 1)}${twoDigits(d.getDate())}-${twoDigits(d.getHours())}${twoDigits(d.getMinutes())}${twoDigits(d.getSeconds())}`;
}

export async function main(options: Options): Promise<number> {
  const parsed = benchServeConfig(options);
  if (!parsed.ok) throw new CliError(parsed.error);
  const config = parsed.value;
  const out = (line: string): void => void process.stdout.write(`${line}\n`);
  const seed = config.seed;
  const tokenizerPath = config.tokenizer;
  const file = await openModelGguf(tokenizerPath);
  if (!file.ok) throw new RuntimeFailure(`--tokenizer: ${file.error}`);
  let tokenizer: Tokenizer;
  try {
    tokenizer = createTokenizer(file.value);
  } catch (e) {
    throw new CliError(`--tokenizer ${tokenizerPath}: cannot build the tokenizer (${errorMessage(e)})`);
  }
  const numPrompts = config.numPrompts;
  const prompts = config.datasetName === "sharegpt"
    ? shareGptDataset(config.datasetPath ?? ((): never => { throw new CliError("--dataset-name sharegpt needs --dataset-path"); })(), numPrompts, tokenizer, config.sharegptOutputLen, seed)
    : randomDataset({
      numPrompts, inputLen: config.inputLen, outputLen: config.outputLen,
      rangeRatio: config.randomRangeRatio, prefixLen: config.randomPrefixLen, seed,
    }, tokenizer.vocabSize, (ids) => tokenizer.decode(ids, { skipSpecialTokens: true }));
  const model = config.model ?? (await firstModel(config));
  if (config.sampling.temperature === undefined) {
    out("WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. The default will be determined on the server side and can be model/API specific. For the old behavior, include --temperature=0.");
  }

  const readySec = config.readyCheckTimeoutSec;
  if (readySec > 0) {
    out("Starting initial single prompt test run...");
    const deadline = performance.now() + readySec * 1000;
    let test = await sendRequest(config, model, prompts[0]!, `${config.requestIdPrefix}ready`, performance.now());
    while (!test.success && performance.now() < deadline) {
      await Bun.sleep(1000);
      test = await sendRequest(config, model, prompts[0]!, `${config.requestIdPrefix}ready`, performance.now());
    }
    if (!test.success) throw new RuntimeFailure(`Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: ${test.error}`);
    out("Initial test run completed.");
  } else {
    out("Skipping endpoint ready check.");
  }
  const warmups = config.numWarmups;
  if (warmups > 0) {
    out(`Warming up with ${warmups} requests...`);
    await Promise.all(Array.from({ length: warmups }, (_, i) => sendRequest(config, model, prompts[i % prompts.length]!, `${config.requestIdPrefix}warmup-${i}`, performance.now())));
    out("Warmup run completed.");
  }
  out("Starting main benchmark run...");
  out(`Traffic request rate: ${Number.isFinite(config.requestRate) ? config.requestRate : "inf"}`);
  out(`Burstiness factor: ${config.burstiness.toFixed(1)} (${config.burstiness === 1 ? "Poisson process" : "Gamma distribution"})`);
  out(`Maximum request concurrency: ${config.maxConcurrency ?? "None"}`);

  const bar = config.disableTqdm ? null : createProgressBar("bench serve", { minTotal: 0, format: (d, t) => `${d}/${t} requests` });
  const rng = createRng(seed + 1);
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  const acquire = async (): Promise<void> => {
    if (config.maxConcurrency === null || inFlight < config.maxConcurrency) { inFlight++; return; }
    await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else inFlight--;
  };
  let finished = 0;
  // vLLM reads the server's spec-decode counters before and after the run
  const specBefore = await fetchSpecDecodeCounters(config.baseUrl, config.headers);
  const startMs = performance.now();
  const tasks: Promise<RequestOutput>[] = [];
  for (let i = 0; i < prompts.length; i++) {
    tasks.push((async () => {
      await acquire();
      try {
        return await sendRequest(config, model, prompts[i]!, `${config.requestIdPrefix}${i}`, startMs);
      } finally {
        release();
        bar?.update(++finished, prompts.length);
      }
    })());
    if (Number.isFinite(config.requestRate) && i < prompts.length - 1) await Bun.sleep(gamma(rng, config.burstiness, 1 / (config.requestRate * config.burstiness)) * 1000);
  }
  const outputs = await Promise.all(tasks);
  const durationS = (performance.now() - startMs) / 1000;
  bar?.done();
  // a server that sent no usage: count the tokens of the text, as vLLM does with its tokenizer
  const counted = outputs.map((o) => (o.success && o.outputTokens < 0 ? { ...o, outputTokens: tokenizer.encode(o.generatedText, { addSpecial: false, parseSpecial: false }).length } : o));
  counted.filter((o) => !o.success).slice(0, 10).forEach((o, i) => out(`Error ${i}: ${o.error}`));
  const metrics = calculateMetrics(counted, durationS, config.percentiles, config.goodput);
  const spec = specDecodeReport(specBefore, await fetchSpecDecodeCounters(config.baseUrl, config.headers));
  const block = resultBlock(metrics, { requestRate: config.requestRate, maxConcurrency: config.maxConcurrency, durationS, selected: config.selected }).split("\n");
  // the section goes after the latency sections, before the closing rule (vLLM's order)
  if (spec !== null) block.splice(block.length - 1, 0, ...spec.lines);
  out(block.join("\n"));

  if (config.saveResult || config.appendResult) {
    const date = dateStamp(new Date());
    const label = config.label;
    const metadata = keyValuePairs("metadata", config.metadata, "=");
    if (!metadata.ok) throw new CliError(metadata.error);
    const json = resultJson({
      date, backend: config.backend, label, modelId: model, tokenizerId: tokenizerPath ?? "embedded:stories260K", numPrompts: prompts.length,
      metadata: metadata.value, requestRate: config.requestRate, burstiness: config.burstiness, maxConcurrency: config.maxConcurrency,
    }, metrics, counted, durationS, config.selected, config.saveDetailed);
    if (spec !== null) Object.assign(json, spec.json);
    const dir = config.resultDir ?? ".";
    mkdirSync(dir, { recursive: true });
    const path = join(dir, config.resultFilename ?? defaultResultFilename(label ?? config.backend, config.requestRate, config.maxConcurrency, model, date));
    if (config.appendResult) appendFileSync(path, `${JSON.stringify(json)}\n`);
    else writeFileSync(path, JSON.stringify(json));
    out(`Result saved to ${path}`);
  }
  return metrics.completed > 0 ? 0 : 1;
}
