/**
 * `fennec run-batch -i IN.jsonl -o OUT.jsonl`: the OpenAI batch file format, as `vllm run-batch` reads and writes it.
 * Each input line is `{"custom_id", "method": "POST", "url": "/v1/chat/completions" | "/v1/completions" |
 * "/v1/embeddings" | "/v1/score" | "/v1/rerank", "body"}`; each
 * output line is `{"id": "vllm-…", "custom_id", "response": {"status_code", "request_id": "vllm-batch-…", "body"},
 * "error"}`, in input order. Requests go through the same HTTP app as `serve` (app.handle, no port), so validation,
 * sampling mapping and errors are the server's. A malformed line gets an error line (its custom_id, else `line-N`) and
 * the rest still runs. With --log-stats the omni tables are printed once, after the whole batch.
 *
 * The output file is truncated at start (a file left by an earlier run never looks like this run's result) and each
 * result is appended as it finishes, so a run killed at 60% keeps its finished 60% (in finishing order: OpenAI's batch
 * output order is not guaranteed either, lines carry custom_id). When the batch is done the file is replaced (temporary
 * file + rename, never half-written) by the same lines in input order, as `vllm run-batch` writes them.
 */
import { errorMessage } from "../util/error-message.ts";
import { closeSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from "node:fs";
import { runBatchConfig, type RunBatchConfig } from "../command-line/run-batch-config.ts";
import type { Options } from "../command-line/flags.ts";
import { BatchTables } from "../metrics/omni-stats-logger.ts";
import type { Orchestrator } from "../frontend/orchestrator.ts";
import { createServingPipeline, stageChainOf } from "../pipeline/serving-pipeline.ts";
import type { StageFactory } from "../pipeline/stage-pipeline.ts";
import { createApp } from "../server/app.ts";
import type { ChatServingOptions } from "../server/chat-serving.ts";
import { readChatFlags } from "./chat-flags.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../server/server-options.ts";
import type { StructuredOutputsSettings } from "../config/structured-outputs-config.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";

/** vLLM run-batch's endpoints (generation, and on an embedding model its pooling ones). */
const SUPPORTED_URLS = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/score", "/v1/rerank"] as const;

export interface BatchOutputLine {
  readonly id: string;
  readonly custom_id: string;
  readonly response: { readonly status_code: number; readonly request_id: string; readonly body: unknown } | null;
  readonly error: unknown;
}

/** One input line, checked; `error` says why it cannot run. */
interface BatchInput {
  readonly customId: string;
  readonly url: string;
  readonly body: Record<string, unknown>;
}

const hex = (): string => crypto.randomUUID().replaceAll("-", "");

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Parses line `lineNumber` (1-based) of the batch file. */
export function parseBatchLine(line: string, lineNumber: number): { ok: true; input: BatchInput } | { ok: false; customId: string; message: string } {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (e) {
    return { ok: false, customId: `line-${lineNumber}`, message: `line ${lineNumber}: not valid JSON (${errorMessage(e)})` };
  }
  const customId = isRecord(value) && typeof value["custom_id"] === "string" ? value["custom_id"] : `line-${lineNumber}`;
  const fail = (message: string) => ({ ok: false as const, customId, message: `line ${lineNumber}: ${message}` });
  if (!isRecord(value)) return fail("expected a JSON object with custom_id, method, url and body");
  if (typeof value["custom_id"] !== "string") return fail("custom_id must be a string");
  if (value["method"] !== "POST") return fail(`method must be "POST" (got ${JSON.stringify(value["method"])})`);
  const url = value["url"];
  if (typeof url !== "string" || !(SUPPORTED_URLS as readonly string[]).includes(url)) {
    return fail(`URL ${JSON.stringify(url)} was used. Supported endpoints: ${SUPPORTED_URLS.join(", ")}`);
  }
  const body = value["body"];
  if (!isRecord(body)) return fail("body must be a JSON object");
  if (body["stream"] === true) return fail("stream=true is not supported in a batch");
  return { ok: true, input: { customId, url, body } };
}

function errorLine(customId: string, statusCode: number, error: unknown): BatchOutputLine {
  return { id: `vllm-${hex()}`, custom_id: customId, response: { status_code: statusCode, request_id: `vllm-batch-${hex()}`, body: null }, error };
}

/** Runs one request through the app; HTTP errors become error lines with the server's error JSON. */
async function runOne(app: { handle(request: Request): Promise<Response> }, input: BatchInput, index: number): Promise<BatchOutputLine> {
  const response = await app.handle(new Request(`http://run-batch.local${input.url}`, {
    method: "POST", headers: { "content-type": "application/json", "x-request-id": `${index}_${hex()}` }, body: JSON.stringify(input.body),
  }));
  const text = await response.text();
  let json: unknown = text;
  try { json = JSON.parse(text); } catch { /* keep the text */ }
  if (response.status !== 200) return errorLine(input.customId, response.status, json);
  return { id: `vllm-${hex()}`, custom_id: input.customId, response: { status_code: 200, request_id: `vllm-batch-${hex()}`, body: json }, error: null };
}

/** `Processed prompts: k/N` on a TTY (stderr), like vLLM's tqdm bar; nothing on a pipe. */
function progress(total: number): { tick(): void; done(): void } {
  const tty = process.stderr.isTTY === true;
  let done = 0;
  let lastDrawMs = 0;
  const draw = () => process.stderr.write(`\rProcessed prompts: ${done}/${total} (${total > 0 ? Math.round((100 * done) / total) : 100}%)`);
  return {
    tick() {
      done++;
      if (!tty) return;
      const now = performance.now();
      if (now - lastDrawMs > 100 || done === total) { lastDrawMs = now; draw(); }
    },
    done() { if (tty) process.stderr.write("\n"); },
  };
}

export interface RunBatchDeps {
  /** tests: stage builder instead of real engines */
  readonly factory?: StageFactory;
  readonly stdout?: (text: string) => void;
}

/** run-batch's typed config; a bad flag is one line, exit 2. */
function readRunBatchConfig(options: Options): RunBatchConfig {
  const config = runBatchConfig(options);
  if (!config.ok) throw new CliError(config.error);
  return config.value;
}

/** Runs a whole batch file; returns the output lines (also written to the output file). */
export async function runBatch(options: Options, deps: RunBatchDeps = {}): Promise<BatchOutputLine[]> {
  return runConfiguredBatch(readRunBatchConfig(options), deps);
}

async function runConfiguredBatch(config: RunBatchConfig, deps: RunBatchDeps = {}): Promise<BatchOutputLine[]> {
  for (const w of config.warnings) process.stderr.write(`WARNING ${w}\n`);
  const { inputFile: inputPath, outputFile: outputPath } = config;
  let text: string;
  try {
    text = readFileSync(inputPath, "utf8");
  } catch (e) {
    throw new CliError(`cannot read ${inputPath}: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`);
  }
  const lines = text.split("\n").map((l, i) => ({ line: l.trim(), lineNumber: i + 1 })).filter((l) => l.line !== "");
  const write = deps.stdout ?? ((t: string) => void process.stdout.write(t));
  const chain = stageChainOf(config.stages, config.engine.kvPeer?.role ?? null);
  if (!chain.ok) throw new CliError(chain.error);
  const chat = readChatFlags(config.chat);
  // the flags are fine: truncate now, before the model loads (a failed load leaves an empty file, not a stale one)
  const output = openOutput(outputPath);
  let tables: BatchTables | null = null;
  const { orchestrator, startupLines } = await createServingPipeline({
    model: config.model, engineArgs: config.engine, chain: chain.value, listener: null,
    tables: config.metrics.logStats ? (numStages) => (tables = new BatchTables(numStages, write)) : null,
    ...(deps.factory ? { factory: deps.factory } : {}),
  }).catch((e: unknown) => {
    output.close();
    // the flags were fine: a model that does not load is a failed run (exit 1)
    throw new RuntimeFailure(e instanceof CliError ? e.message : `cannot start the engine: ${errorMessage(e)}`);
  });
  for (const line of startupLines) process.stderr.write(`${line}\n`);
  try {
    const app = createBatchApp(orchestrator, chat, config.structuredOutputs);
    const bar = progress(lines.length);
    const results = await Promise.all(lines.map(async ({ line, lineNumber }, index) => {
      const parsed = parseBatchLine(line, lineNumber);
      const result = parsed.ok ? await runOne(app, parsed.input, index) : errorLine(parsed.customId, 400, parsed.message);
      output.append(result);
      bar.tick();
      return result;
    }));
    bar.done();
    output.finish(results);
    (tables as BatchTables | null)?.print();
    return results;
  } finally {
    output.close();
    await orchestrator.shutdown();
  }
}

/** The output file: truncated now, one line appended per finished result, rewritten in input order at the end. */
function openOutput(path: string): { append(line: BatchOutputLine): void; finish(lines: readonly BatchOutputLine[]): void; close(): void } {
  const cannotWrite = (e: unknown): CliError => new CliError(`cannot write ${path}: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`);
  let fd: number | null;
  try {
    fd = openSync(path, "w");
  } catch (e) {
    throw cannotWrite(e);
  }
  const close = (): void => {
    if (fd !== null) closeSync(fd);
    fd = null;
  };
  return {
    append(line) {
      if (fd === null) return;
      try {
        writeSync(fd, `${JSON.stringify(line)}\n`);
      } catch (e) {
        throw cannotWrite(e);
      }
    },
    finish(lines) {
      close();
      const temporary = `${path}.${process.pid}.tmp`;
      try {
        writeFileSync(temporary, lines.map((r) => `${JSON.stringify(r)}\n`).join(""));
        renameSync(temporary, path);
      } catch (e) {
        throw cannotWrite(e);
      }
    },
    close,
  };
}

function createBatchApp(orchestrator: Orchestrator, chat: ChatServingOptions, structuredOutputs: StructuredOutputsSettings) {
  return createApp({
    chat, structuredOutputs,
    orchestrator, servedModelName: orchestrator.modelConfig.name, modelPath: "run-batch", apiKey: null,
    enablePerRequestMetrics: false, forceIncludeUsage: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
    shutdownSignal: new AbortController().signal, log: (line) => void process.stderr.write(`${line}\n`),
  });
}

export async function main(options: Options): Promise<number> {
  const config = readRunBatchConfig(options);
  const results = await runConfiguredBatch(config);
  const failed = results.filter((r) => r.error !== null).length;
  process.stderr.write(`fennec run-batch: ${results.length} requests, ${failed} failed -> ${config.outputFile}\n`);
  return 0;
}
