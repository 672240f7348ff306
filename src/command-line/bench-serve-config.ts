/**
 * `bench serve`'s flags as one typed config (vllm/benchmarks/serve.py's arguments): where to send, the dataset, the
 * rate and concurrency, the sampling fields sent only when given, what to report and where to save it. The API key
 * comes from --api-key or $OPENAI_API_KEY, as in vLLM.
 */
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { intOrNull, stringOrNull } from "./flag-values.ts";

/** the latency metrics vLLM reports percentiles of (--percentile-metrics) */
export type MetricName = "ttft" | "tpot" | "itl" | "e2el";
export const METRIC_NAMES: readonly MetricName[] = ["ttft", "tpot", "itl", "e2el"];

const num = (v: Options[string] | undefined): number | null => (typeof v === "number" ? v : null);

/** "KEY=VALUE KEY2=VALUE2" (vLLM takes them as several arguments; here in one, space separated) */
export function keyValuePairs(flag: string, text: string | null, sep: string): Result<Record<string, string>> {
  const out: Record<string, string> = {};
  if (text === null) return ok(out);
  for (const part of text.split(/[\s,]+/).filter((p) => p !== "")) {
    const i = part.indexOf(sep);
    if (i <= 0) return err(`--${flag}: "${part}" is not KEY${sep}VALUE`);
    out[part.slice(0, i)] = part.slice(i + 1);
  }
  return ok(out);
}

export interface BenchServeConfig {
  readonly backend: "openai" | "vllm" | "openai-chat";
  readonly url: string;
  readonly baseUrl: string;
  readonly model: string | null;
  readonly requestRate: number;
  readonly burstiness: number;
  readonly maxConcurrency: number | null;
  readonly selected: MetricName[];
  readonly percentiles: number[];
  readonly goodput: Partial<Record<MetricName, number>> | null;
  readonly sampling: Record<string, number>;
  readonly extraBody: Record<string, unknown>;
  readonly headers: Record<string, string>;
  readonly ignoreEos: boolean;
  readonly requestIdPrefix: string;
  /** seed of the dataset sampling and arrival times */
  readonly seed: number;
  /** --tokenizer: the GGUF whose tokenizer makes and counts the prompts; null: the embedded model's */
  readonly tokenizer: string | null;
  readonly datasetName: "random" | "sharegpt";
  readonly datasetPath: string | null;
  readonly numPrompts: number;
  /** --input-len, else --random-input-len */
  readonly inputLen: number;
  /** --output-len, else --random-output-len */
  readonly outputLen: number;
  readonly randomRangeRatio: number;
  readonly randomPrefixLen: number;
  readonly sharegptOutputLen: number | null;
  readonly readyCheckTimeoutSec: number;
  readonly numWarmups: number;
  readonly disableTqdm: boolean;
  readonly saveResult: boolean;
  readonly saveDetailed: boolean;
  readonly appendResult: boolean;
  readonly resultDir: string | null;
  readonly resultFilename: string | null;
  readonly label: string | null;
  /** --metadata as given, KEY=VALUE pairs read when the result is saved (keyValuePairs) */
  readonly metadata: string | null;
}

export function benchServeConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<BenchServeConfig> {
  const backend = (stringOrNull(options.backend) ?? "openai") as BenchServeConfig["backend"];
  const chat = backend === "openai-chat";
  const endpoint = stringOrNull(options.endpoint) ?? (chat ? "/v1/chat/completions" : "/v1/completions");
  if (!endpoint.endsWith(chat ? "chat/completions" : "completions")) return err(`--endpoint ${endpoint}: the ${backend} backend needs a path ending in ${chat ? "chat/completions" : "completions"}`);
  const baseUrl = (stringOrNull(options["base-url"]) ?? `http://${stringOrNull(options.host)}:${num(options.port)}`).replace(/\/+$/, "");
  if (!/^https?:\/\//.test(baseUrl)) return err(`--base-url ${baseUrl}: needs http:// or https://`);
  const rateText = stringOrNull(options["request-rate"]) ?? "inf";
  const requestRate = rateText === "inf" ? Infinity : Number(rateText);
  if (!(requestRate > 0)) return err(`--request-rate must be a positive number or inf (got "${rateText}")`);
  const selected = (stringOrNull(options["percentile-metrics"]) ?? "").split(",").map((m) => m.trim()).filter((m) => m !== "");
  for (const m of selected) if (!METRIC_NAMES.includes(m as MetricName)) return err(`--percentile-metrics: unknown metric "${m}" (known: ${METRIC_NAMES.join(", ")})`);
  const percentiles = (stringOrNull(options["metric-percentiles"]) ?? "").split(",").filter((p) => p.trim() !== "").map(Number);
  if (percentiles.some((p) => !(p >= 0 && p <= 100))) return err(`--metric-percentiles must be numbers in 0..100 (got "${stringOrNull(options["metric-percentiles"])}")`);
  const goodputPairs = keyValuePairs("goodput", stringOrNull(options.goodput), ":");
  if (!goodputPairs.ok) return goodputPairs;
  const goodput: Partial<Record<MetricName, number>> = {};
  for (const [k, v] of Object.entries(goodputPairs.value)) {
    if (k !== "ttft" && k !== "tpot" && k !== "e2el") return err(`--goodput: unknown objective "${k}" (ttft, tpot, e2el)`);
    if (!(Number(v) >= 0)) return err(`--goodput ${k}: needs milliseconds (got "${v}")`);
    goodput[k] = Number(v);
  }
  const sampling: Record<string, number> = {};
  for (const [flag, field] of [["temperature", "temperature"], ["top-p", "top_p"], ["top-k", "top_k"], ["min-p", "min_p"], ["frequency-penalty", "frequency_penalty"], ["presence-penalty", "presence_penalty"], ["repetition-penalty", "repetition_penalty"]] as const) {
    const v = num(options[flag]);
    if (v !== null) sampling[field] = v;
  }
  let extraBody: Record<string, unknown> = {};
  const extra = stringOrNull(options["extra-body"]);
  if (extra !== null) {
    try {
      extraBody = JSON.parse(extra) as Record<string, unknown>;
    } catch {
      return err(`--extra-body must be a JSON object (got ${extra})`);
    }
    if (typeof extraBody !== "object" || extraBody === null || Array.isArray(extraBody)) return err("--extra-body must be a JSON object");
  }
  const headerPairs = keyValuePairs("header", stringOrNull(options.header), "=");
  if (!headerPairs.ok) return headerPairs;
  const headers: Record<string, string> = { "content-type": "application/json", ...headerPairs.value };
  const key = stringOrNull(options["api-key"]) ?? env.OPENAI_API_KEY ?? null;
  if (key) headers.authorization = `Bearer ${key}`;
  const prefix = stringOrNull(options["request-id-prefix"]) ?? `bench-${Math.floor(Math.random() * 2 ** 32).toString(16).padStart(8, "0")}-`;
  return ok({
    backend, url: baseUrl + endpoint, baseUrl, model: stringOrNull(options.model), requestRate, burstiness: num(options.burstiness) ?? 1,
    maxConcurrency: num(options["max-concurrency"]), selected: selected as MetricName[], percentiles,
    goodput: Object.keys(goodput).length > 0 ? goodput : null, sampling, extraBody, headers, ignoreEos: options["ignore-eos"] === true, requestIdPrefix: prefix,
    seed: num(options.seed) ?? 0, tokenizer: stringOrNull(options.tokenizer),
    datasetName: options["dataset-name"] === "sharegpt" ? "sharegpt" : "random", datasetPath: stringOrNull(options["dataset-path"]),
    numPrompts: Number(options["num-prompts"]),
    inputLen: intOrNull(options["input-len"]) ?? Number(options["random-input-len"]), outputLen: intOrNull(options["output-len"]) ?? Number(options["random-output-len"]),
    randomRangeRatio: Number(options["random-range-ratio"]), randomPrefixLen: Number(options["random-prefix-len"]),
    sharegptOutputLen: num(options["sharegpt-output-len"]), readyCheckTimeoutSec: Number(options["ready-check-timeout-sec"]),
    numWarmups: Number(options["num-warmups"]), disableTqdm: options["disable-tqdm"] === true,
    saveResult: options["save-result"] === true, saveDetailed: options["save-detailed"] === true, appendResult: options["append-result"] === true,
    resultDir: stringOrNull(options["result-dir"]), resultFilename: stringOrNull(options["result-filename"]), label: stringOrNull(options.label),
    metadata: stringOrNull(options.metadata),
  });
}
