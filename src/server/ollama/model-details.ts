/**
 * The served model as Ollama's model lists describe it (ollama api/types.go ListModelResponse, ProcessModelResponse,
 * ModelDetails): /api/tags and /api/ps list it under each of its names. Facts come from the GGUF's metadata when serve
 * handed it in (ollama-serving.ts), else from the loaded model's configuration. `digest` identifies the served file
 * (a SHA-256 of its path, size and time), not the hash of its bytes: Ollama's digest is its manifest's, which a GGUF
 * served from a path does not have.
 * @example modelDetails(options).family // "llama"
 */
import { createHash } from "node:crypto";
import type { ServerOptions } from "../server-options.ts";
import type { GgufInfoValue } from "./ollama-serving.ts";
import { fimTokens } from "./generate-request.ts";

/** ggml's general.file_type numbers -> Ollama's quantization_level names (ggml llama_ftype) */
const FILE_TYPES: Readonly<Record<number, string>> = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M",
  13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16", 38: "MXFP4",
};

const meta = (options: ServerOptions, key: string): GgufInfoValue | undefined => options.ollama?.metadata?.get(key);

/** Parameter count: general.parameter_count when the GGUF has it, else counted from the configuration's shapes. */
export function parameterCount(options: ServerOptions): number {
  const given = meta(options, "general.parameter_count");
  if (typeof given === "number") return given;
  const c = options.orchestrator.modelConfig;
  const attention = c.dim * c.headDim * (c.numHeads + 2 * c.numKvHeads) + c.numHeads * c.headDim * c.dim;
  const ffn = 3 * c.dim * c.hiddenDim;
  return c.vocabSize * c.dim * (c.tiedEmbeddings ? 1 : 2) + c.numLayers * (attention + ffn + 2 * c.dim) + c.dim;
}

/** Ollama's parameter_size text: "8.0B", "494.0M", "260.0K" */
export function parameterSize(count: number): string {
  for (const [unit, size] of [["B", 1e9], ["M", 1e6], ["K", 1e3]] as const) if (count >= size) return `${(count / size).toFixed(1)}${unit}`;
  return String(count);
}

/** `parentModel`: the base model's name for a model built with an adapter (adapter-models.ts), "" for a base model */
export function modelDetails(options: ServerOptions, parentModel = ""): Record<string, unknown> {
  const family = String(meta(options, "general.architecture") ?? options.orchestrator.modelConfig.architecture);
  const fileType = meta(options, "general.file_type");
  return {
    parent_model: parentModel, format: "gguf", family, families: [family],
    parameter_size: parameterSize(parameterCount(options)),
    quantization_level: typeof fileType === "number" ? (FILE_TYPES[fileType] ?? `file type ${fileType}`) : "unknown",
  };
}

export function modelDigest(options: ServerOptions): string {
  const o = options.ollama;
  return createHash("sha256").update(`${options.modelPath}\n${o?.fileSizeBytes ?? 0}\n${o?.modifiedAtMs ?? 0}`).digest("hex");
}

/** What the model can do, in Ollama's capability names (ollama types/model/capability.go). */
export function capabilities(options: ServerOptions): string[] {
  if ((options.orchestrator.pooler ?? null) !== null) return ["embedding"];
  return [
    "completion",
    ...((options.chat?.toolCallParser ?? null) !== null ? ["tools"] : []),
    ...((options.chat?.reasoningParser ?? null) !== null ? ["thinking"] : []),
    ...(fimTokens(options.ollama?.metadata) !== null ? ["insert"] : []),
  ];
}

/** One /api/tags entry. */
export function tagEntry(options: ServerOptions, name: string, parentModel = ""): Record<string, unknown> {
  return {
    name, model: name, modified_at: new Date(options.ollama?.modifiedAtMs ?? 0).toISOString(), size: options.ollama?.fileSizeBytes ?? 0,
    digest: modelDigest(options), details: modelDetails(options, parentModel), capabilities: capabilities(options),
  };
}

/** One /api/ps entry: fennec runs on the CPU, so size_vram is 0. */
export function psEntry(options: ServerOptions, name: string, expiresAt: string, parentModel = ""): Record<string, unknown> {
  return {
    name, model: name, size: options.ollama?.fileSizeBytes ?? 0, digest: modelDigest(options), details: modelDetails(options, parentModel),
    expires_at: expiresAt, size_vram: 0, context_length: options.orchestrator.maxModelLen,
  };
}
