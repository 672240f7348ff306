/**
 * `--stage-config FILE`: a chain of stages in YAML or JSON, modelled on vLLM-Omni's stage configs (vllm_omni/model_executor/stage_configs/*.yaml): `stage_args` is a list of stages, each with its own `engine_args` (its own model) and
 * `default_sampling_params`; stage i > 0 reads stage i-1 (`engine_input_source: [i-1]`) through an edge that carries
 * either the previous stage's KV blocks (`input_type: kv_blocks`, same model: the stage continues the sequence, as the
 * decode half of disaggregated prefill) or its output text (`input_type: text`: the next stage's prompt).
 * Every problem is one line naming the file, the stage and the problem, found before any model loads.
 * @example const config = loadStageConfig("examples/three-stage.yaml"); if (!config.ok) throw new CliError(config.error);
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { DEFAULT_SAMPLING_PARAMS, type SamplingParams } from "../engine/sampling-params.ts";
import { jsonPreview, nestingProblem } from "../util/json-limits.ts";
import { err, ok, type Result } from "../util/result.ts";

export type EdgeInput = "kv_blocks" | "text";

/** Per-stage engine arguments (vLLM names); null = the command line's value. */
export interface StageEngineArgs {
  /** absolute path of the GGUF file; null = the command line's --model (or the embedded default) */
  readonly model: string | null;
  readonly maxNumSeqs: number | null;
  readonly maxNumBatchedTokens: number | null;
  readonly maxModelLen: number | null;
  readonly blockSize: number | null;
  readonly kvCacheMemoryBytes: number | null;
  readonly enablePrefixCaching: boolean | null;
  readonly threads: number | null;
  /** the stage's backend (a prefill stage on a GPU, a decode stage on the CPU, ...) */
  readonly device: "cpu" | "webgpu" | null;
}

export interface StageSpec {
  readonly stageId: number;
  readonly modelStage: string;
  readonly engineArgs: StageEngineArgs;
  /** what the edge into this stage carries; null for stage 0 */
  readonly input: EdgeInput | null;
  /** overrides of the request's sampling parameters for this stage */
  readonly samplingOverrides: Partial<SamplingParams>;
  readonly finalOutput: boolean;
  /**
   * the stage runs in another process (stage 0 only: a prefill server speaking vLLM's kv_transfer_params, e.g.
   * `fennec serve --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'`): its base URL.
   * Stage 1 pulls the prompt's KV blocks from it over the NixlConnector; absent = a local engine.
   */
  readonly url?: string | null;
}

export interface StageChain {
  /** where it came from (a file, or "--pipeline pd") */
  readonly source: string;
  readonly stages: readonly StageSpec[];
}

/** Keys, as tables: the one place that says what a config may contain. */
const TOP_KEYS = ["stage_args", "async_chunk", "runtime"] as const;
const STAGE_KEYS = [
  "stage_id", "stage_type", "engine_args", "engine_input_source", "input_type", "final_output", "final_output_type",
  "default_sampling_params", "is_comprehension", "url",
] as const;
type NumberArg = "maxNumSeqs" | "maxNumBatchedTokens" | "maxModelLen" | "blockSize" | "kvCacheMemoryBytes" | "threads";
const ENGINE_NUMBER_KEYS: Readonly<Record<string, NumberArg>> = {
  max_num_seqs: "maxNumSeqs", max_num_batched_tokens: "maxNumBatchedTokens", max_model_len: "maxModelLen",
  block_size: "blockSize", kv_cache_memory: "kvCacheMemoryBytes", threads: "threads",
};
const ENGINE_KEYS = ["model", "model_stage", "enable_prefix_caching", "device", ...Object.keys(ENGINE_NUMBER_KEYS)];
const DEVICES = ["cpu", "webgpu"] as const;
/** default_sampling_params: wire name -> SamplingParams field and kind */
const SAMPLING_KEYS: Readonly<Record<string, readonly [keyof SamplingParams, "number" | "int" | "bool" | "strings" | "ints"]>> = {
  temperature: ["temperature", "number"], top_p: ["topP", "number"], top_k: ["topK", "int"], min_p: ["minP", "number"],
  max_tokens: ["maxTokens", "int"], min_tokens: ["minTokens", "int"], seed: ["seed", "int"],
  presence_penalty: ["presencePenalty", "number"], frequency_penalty: ["frequencyPenalty", "number"],
  repetition_penalty: ["repetitionPenalty", "number"], ignore_eos: ["ignoreEos", "bool"], stop: ["stop", "strings"],
  stop_token_ids: ["stopTokenIds", "ints"], skip_special_tokens: ["skipSpecialTokens", "bool"],
};
const EDGE_INPUTS: readonly EdgeInput[] = ["kv_blocks", "text"];

type Json = unknown;

/** Each stage is an engine Worker with its own model copy and KV pool: a chain longer than this is a mistake. */
export const MAX_STAGES = 16;
/** A config is a few hundred bytes; nothing real comes near these. */
const MAX_CONFIG_BYTES = 1024 * 1024;
const MAX_CONFIG_DEPTH = 32;

function isRecord(v: Json): v is Record<string, Json> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function unknownKey(obj: Record<string, Json>, known: readonly string[]): string | null {
  return Object.keys(obj).find((k) => !known.includes(k)) ?? null;
}

function parseEngineArgs(raw: Json, baseDir: string, where: string): Result<StageEngineArgs> {
  const args: { -readonly [K in keyof StageEngineArgs]: StageEngineArgs[K] } = {
    model: null, maxNumSeqs: null, maxNumBatchedTokens: null, maxModelLen: null, blockSize: null, kvCacheMemoryBytes: null,
    enablePrefixCaching: null, threads: null, device: null,
  };
  if (raw === undefined || raw === null) return ok(args);
  if (!isRecord(raw)) return err(`${where}: engine_args must be a mapping`);
  const bad = unknownKey(raw, ENGINE_KEYS);
  if (bad !== null) return err(`${where}: unknown engine_args key "${bad}" (known: ${ENGINE_KEYS.join(", ")})`);
  if (raw["model"] !== undefined && raw["model"] !== null) {
    if (typeof raw["model"] !== "string" || raw["model"] === "") return err(`${where}: engine_args.model must be a file path`);
    const path = isAbsolute(raw["model"]) ? raw["model"] : resolve(baseDir, raw["model"]);
    if (!existsSync(path)) return err(`${where}: model file not found: ${path}`);
    args.model = path;
  }
  for (const [key, field] of Object.entries(ENGINE_NUMBER_KEYS)) {
    const v = raw[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) return err(`${where}: engine_args.${key} must be a positive integer (got ${jsonPreview(v)})`);
    args[field] = v;
  }
  const device = raw["device"];
  if (device !== undefined && device !== null) {
    if (!(DEVICES as readonly unknown[]).includes(device)) return err(`${where}: engine_args.device must be one of ${DEVICES.join(", ")} (got ${jsonPreview(device)})`);
    args.device = device as (typeof DEVICES)[number];
  }
  const prefix = raw["enable_prefix_caching"];
  if (prefix !== undefined && prefix !== null) {
    if (typeof prefix !== "boolean") return err(`${where}: engine_args.enable_prefix_caching must be true or false`);
    args.enablePrefixCaching = prefix;
  }
  return ok(args);
}

function parseSampling(raw: Json, where: string): Result<Partial<SamplingParams>> {
  if (raw === undefined || raw === null) return ok({});
  if (!isRecord(raw)) return err(`${where}: default_sampling_params must be a mapping`);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(raw)) {
    const spec = SAMPLING_KEYS[key];
    if (!spec) return err(`${where}: unknown default_sampling_params key "${key}" (known: ${Object.keys(SAMPLING_KEYS).join(", ")})`);
    const [field, kind] = spec;
    const okKind =
      kind === "number" ? typeof v === "number" && Number.isFinite(v)
      : kind === "int" ? typeof v === "number" && Number.isInteger(v)
      : kind === "bool" ? typeof v === "boolean"
      : kind === "strings" ? Array.isArray(v) && v.every((s) => typeof s === "string")
      : Array.isArray(v) && v.every((s) => typeof s === "number" && Number.isInteger(s));
    if (!okKind) return err(`${where}: default_sampling_params.${key} must be ${kind === "strings" ? "a list of strings" : kind === "ints" ? "a list of integers" : `a ${kind === "bool" ? "boolean" : kind}`} (got ${jsonPreview(v)})`);
    out[field] = v;
  }
  return ok(out as Partial<SamplingParams>);
}

function parseStage(raw: Json, index: number, numStages: number, baseDir: string, file: string): Result<StageSpec> {
  const where = `${file}: stage ${index}`;
  if (!isRecord(raw)) return err(`${where}: each stage_args entry must be a mapping`);
  const bad = unknownKey(raw, STAGE_KEYS);
  if (bad !== null) return err(`${where}: unknown key "${bad}" (known: ${STAGE_KEYS.join(", ")})`);
  if (raw["stage_id"] !== index) return err(`${where}: stage_id must be ${index} (stages form a chain, numbered in order; got ${jsonPreview(raw["stage_id"])})`);
  if (raw["stage_type"] !== undefined && raw["stage_type"] !== "llm") return err(`${where}: stage_type ${jsonPreview(raw["stage_type"])} is not supported (only "llm")`);
  const outType = raw["final_output_type"];
  if (outType !== undefined && outType !== "text") return err(`${where}: final_output_type ${jsonPreview(outType)} is not supported (only "text")`);
  const engineArgs = parseEngineArgs(raw["engine_args"], baseDir, where);
  if (!engineArgs.ok) return engineArgs;
  const sampling = parseSampling(raw["default_sampling_params"], where);
  if (!sampling.ok) return sampling;
  let input: EdgeInput | null = null;
  if (index === 0) {
    if (raw["engine_input_source"] !== undefined || raw["input_type"] !== undefined) return err(`${where}: stage 0 reads the request; it takes no engine_input_source or input_type`);
  } else {
    const source = raw["engine_input_source"] ?? [index - 1];
    if (!Array.isArray(source) || source.length !== 1 || source[0] !== index - 1) {
      return err(`${where}: engine_input_source must be [${index - 1}] (fennec runs chains: each stage reads the one before; got ${jsonPreview(source)})`);
    }
    const kind = raw["input_type"] ?? "text";
    if (typeof kind !== "string" || !EDGE_INPUTS.includes(kind as EdgeInput)) return err(`${where}: input_type must be one of ${EDGE_INPUTS.join(", ")} (got ${jsonPreview(kind)})`);
    input = kind as EdgeInput;
  }
  const finalOutput = raw["final_output"] ?? index === numStages - 1;
  if (typeof finalOutput !== "boolean") return err(`${where}: final_output must be true or false`);
  if (finalOutput !== (index === numStages - 1)) return err(`${where}: final_output must be ${index === numStages - 1} (the last stage's output is the response)`);
  const modelStage = raw["engine_args"] !== undefined && isRecord(raw["engine_args"]) && typeof raw["engine_args"]["model_stage"] === "string" ? raw["engine_args"]["model_stage"] : `stage${index}`;
  const url = parseStageUrl(raw, index, where);
  if (!url.ok) return url;
  return ok({ stageId: index, modelStage, engineArgs: engineArgs.value, input, samplingOverrides: sampling.value, finalOutput, ...(url.value !== null ? { url: url.value } : {}) });
}

/**
 * `url`: a stage 0 that runs in another process, as a prefill instance of vLLM's disaggregated serving. It computes
 * the prompt's KV blocks there, so the stage has no engine here: no engine_args, no default_sampling_params (it
 * generates one token, which stage 1 generates again from the loaded blocks, as vLLM's decode instance does).
 */
function parseStageUrl(raw: Record<string, Json>, index: number, where: string): Result<string | null> {
  const value = raw["url"];
  if (value === undefined || value === null) return ok(null);
  if (index !== 0) return err(`${where}: url (a stage in another process) is supported on stage 0 only: a prefill server whose KV blocks stage 1 pulls`);
  if (typeof value !== "string") return err(`${where}: url must be the prefill server's base URL, e.g. http://10.0.0.1:8100 (got ${jsonPreview(value)})`);
  let url: URL;
  try { url = new URL(value); } catch { return err(`${where}: url ${jsonPreview(value)} is not a URL (give http://host:port)`); }
  if (url.protocol !== "http:" && url.protocol !== "https:") return err(`${where}: url must be http:// or https:// (got ${jsonPreview(value)})`);
  for (const key of ["engine_args", "default_sampling_params"]) {
    if (raw[key] !== undefined) return err(`${where}: ${key} cannot be set on a stage in another process (url): its server's own command line decides`);
  }
  return ok(`${url.origin}${url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "")}`);
}

/**
 * The stage chain's needs from the command line's --kv-transfer-config (one line, checked before any model loads):
 * a remote stage 0 needs the local engines to be NixlConnector consumers, since stage 1 pulls the blocks.
 * @example const problem = remoteStageProblem(chain, config.engine.kvPeer?.role ?? null); if (problem) throw new CliError(problem);
 */
export function remoteStageProblem(chain: StageChain | null, kvPeerRole: "kv_producer" | "kv_consumer" | "kv_both" | null): string | null {
  const remote = chain?.stages.find((s) => s.url);
  if (!remote) return null;
  if (kvPeerRole === "kv_consumer" || kvPeerRole === "kv_both") return null;
  return `${chain!.source}: stage ${remote.stageId} runs at ${remote.url}: start with --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' so stage ${remote.stageId + 1} can pull its KV blocks${kvPeerRole === "kv_producer" ? " (kv_producer only serves blocks)" : ""}`;
}

/** Checks that every edge can carry what it is given (a KV edge needs the same model and block size on both ends). */
function checkEdges(stages: readonly StageSpec[], file: string): Result<null> {
  const remote = stages.find((s) => s.url);
  if (remote && stages[remote.stageId + 1]?.input !== "kv_blocks") {
    return err(`${file}: stage ${remote.stageId + 1}: the stage after one in another process (url) must take its KV blocks (input_type: kv_blocks)${stages.length === 1 ? "; add a local decode stage 1" : ""}`);
  }
  for (const stage of stages) {
    if (stage.input !== "kv_blocks") continue;
    const prev = stages[stage.stageId - 1]!;
    const where = `${file}: stage ${stage.stageId}`;
    // the remote server's model and block size are checked when the blocks are read (engine/kv-connector/peer-connector.ts)
    if (prev.url) continue;
    if (prev.engineArgs.model !== stage.engineArgs.model) {
      return err(`${where}: input_type kv_blocks needs the same model as stage ${prev.stageId} (KV blocks are model-specific; got ${stage.engineArgs.model ?? "--model"} vs ${prev.engineArgs.model ?? "--model"}); use input_type text`);
    }
    if (prev.engineArgs.blockSize !== stage.engineArgs.blockSize) {
      return err(`${where}: input_type kv_blocks needs the same block_size as stage ${prev.stageId} (got ${stage.engineArgs.blockSize ?? "default"} vs ${prev.engineArgs.blockSize ?? "default"})`);
    }
    if (prev.samplingOverrides.maxTokens !== undefined) {
      return err(`${file}: stage ${prev.stageId}: max_tokens cannot be set on a stage whose KV blocks go to stage ${stage.stageId} (it stops after the first token)`);
    }
  }
  return ok(null);
}

/** Validates a parsed document (from YAML or JSON). */
export function parseStageConfig(doc: Json, file: string, baseDir: string): Result<StageChain> {
  if (!isRecord(doc)) return err(`${file}: expected a mapping with stage_args at the top`);
  const bad = unknownKey(doc, TOP_KEYS);
  if (bad !== null) return err(`${file}: unknown top-level key "${bad}" (known: ${TOP_KEYS.join(", ")})`);
  if (doc["async_chunk"] !== undefined && doc["async_chunk"] !== false) return err(`${file}: async_chunk: true is not supported (stages run one after the other)`);
  const list = doc["stage_args"];
  if (!Array.isArray(list) || list.length === 0) return err(`${file}: stage_args must be a non-empty list of stages`);
  if (list.length > MAX_STAGES) return err(`${file}: stage_args has ${list.length} stages, more than the limit of ${MAX_STAGES} (each stage is an engine Worker holding its own model)`);
  const stages: StageSpec[] = [];
  for (let i = 0; i < list.length; i++) {
    const stage = parseStage(list[i], i, list.length, baseDir, file);
    if (!stage.ok) return stage;
    stages.push(stage.value);
  }
  const edges = checkEdges(stages, file);
  if (!edges.ok) return edges;
  return ok({ source: file, stages });
}

/** Reads and validates a YAML or JSON stage config (YAML is a superset of JSON, so one parser reads both). */
export function loadStageConfig(file: string): Result<StageChain> {
  if (!existsSync(file)) return err(`--stage-config: file not found: ${file}`);
  const sizeBytes = statSync(file).size;
  if (sizeBytes > MAX_CONFIG_BYTES) return err(`${file}: the file is ${sizeBytes} bytes, more than a stage config's limit of ${MAX_CONFIG_BYTES}`);
  const text = readFileSync(file, "utf8");
  // before the parser: 100k nested brackets overflowed its stack ("Maximum call stack size exceeded")
  const nesting = nestingProblem(text, { maxDepth: MAX_CONFIG_DEPTH, yaml: true });
  if (nesting !== null) return err(`${file}: refused: ${nesting}`);
  let doc: Json;
  try {
    doc = parseYaml(text);
  } catch (e) {
    // the yaml library's first line ends with ":" before a code frame: keep the line, drop the dangling colon
    const message = (e instanceof Error ? e.message.split("\n")[0]! : String(e)).replace(/:\s*$/, "");
    return err(`${file}: not valid YAML or JSON: ${message}`);
  }
  return parseStageConfig(doc, file, dirname(resolve(file)));
}

/** `--pipeline pd`: disaggregated prefill (stage 0) and decode (stage 1) of one model, the KV blocks on the edge. */
export function pdChain(): StageChain {
  const engineArgs: StageEngineArgs = {
    model: null, maxNumSeqs: null, maxNumBatchedTokens: null, maxModelLen: null, blockSize: null, kvCacheMemoryBytes: null,
    enablePrefixCaching: null, threads: null, device: null,
  };
  return {
    source: "--pipeline pd",
    stages: [
      { stageId: 0, modelStage: "prefill", engineArgs, input: null, samplingOverrides: {}, finalOutput: false },
      { stageId: 1, modelStage: "decode", engineArgs, input: "kv_blocks", samplingOverrides: {}, finalOutput: true },
    ],
  };
}

/** The sampling parameters a stage runs with. */
export function stageSampling(request: SamplingParams, stage: StageSpec): SamplingParams {
  return { ...DEFAULT_SAMPLING_PARAMS, ...request, ...stage.samplingOverrides };
}
