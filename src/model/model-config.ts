/**
 * The shape of a model, read from GGUF metadata by `model/read-model-config.ts`.
 * Everything below the engine reads the model only through this.
 */
export type Architecture = "llama" | "qwen2" | "qwen3";

export interface ModelConfig {
  readonly architecture: Architecture;
  /** general.name, or the file name */
  readonly name: string;
  readonly vocabSize: number;
  /** embedding length */
  readonly dim: number;
  /** feed-forward length */
  readonly hiddenDim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /** rope.dimension_count (usually = headDim) */
  readonly ropeDim: number;
  readonly ropeFreqBase: number;
  /** NEOX (split-half) rope: qwen2, qwen3; llama uses adjacent pairs */
  readonly ropeNeox: boolean;
  readonly rmsEps: number;
  readonly contextLength: number;
  /** no output.weight: the LM head is token_embd */
  readonly tiedEmbeddings: boolean;
  /** qwen2: attn_{q,k,v}.bias */
  readonly hasQkvBias: boolean;
  /** qwen3: attn_{q,k}_norm */
  readonly hasQkNorm: boolean;
}
