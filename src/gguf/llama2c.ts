/**
 * Our converter from Karpathy's llama2.c legacy checkpoint (+ its tokenizer.bin) to a GGUF that llama.cpp loads.
 *
 * Checkpoint: 7 x i32 header (dim, hiddenDim, nLayers, nHeads, nKvHeads, vocabSize (negative: untied classifier),
 * seqLen), then f32 tensors in this order (llama2.c run.c memory_map_weights), each row-major [out][in]:
 *   token_embedding [vocab][dim], rms_att [L][dim], wq [L][dim][dim], wk [L][kvDim][dim], wv [L][kvDim][dim],
 *   wo [L][dim][dim], rms_ffn [L][dim], w1 [L][hidden][dim], w2 [L][dim][hidden], w3 [L][hidden][dim], rms_final [dim],
 *   freq_cis_real + freq_cis_imag [seqLen][headSize/2] each (legacy RoPE tables: skipped), wcls [vocab][dim] if untied.
 * Row-major [out][in] is exactly ggml's [ne0 = in, ne1 = out], so tensors copy straight across. llama2.c's RoPE
 * rotates adjacent pairs, which is ggml's normal (non-NEOX) rope: no Q/K permutation.
 *
 * Tokenizer: i32 maxTokenLength, then vocab x (f32 score, i32 length, bytes). Spaces are stored as ' ', and ids 0/1/2
 * are "<unk>", "\n<s>\n", "\n</s>\n"; GGUF (SentencePiece style) wants U+2581 and "<unk>"/"<s>"/"</s>".
 */
import { GgmlType } from "../tensor/dtypes.ts";
import { err, ok, type Result } from "../util/result.ts";
import { GgufValueType, type GgufMetadataEntry } from "./gguf-file.ts";
import { mdArray, mdBool, mdF32, mdString, mdU32 } from "./metadata.ts";
import { archKey, FILE_TYPE, KEY, tensorName, TokenType, type TensorKey } from "./names.ts";
import type { GgufTensorToWrite, GgufToWrite } from "./writer.ts";

export interface Llama2cConfig {
  readonly dim: number;
  readonly hiddenDim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly vocabSize: number;
  readonly seqLen: number;
  /** vocabSize was positive: the classifier is the token embedding */
  readonly sharedClassifier: boolean;
}

export interface Llama2cTokenizer {
  readonly tokens: string[];
  readonly scores: number[];
}

/** Facts llama2.c hard-codes (run.c) that GGUF wants spelled out. */
const LLAMA2C_RMS_EPS = 1e-5;
const LLAMA2C_ROPE_FREQ_BASE = 10000;
const HEADER_INTS = 7;
const SPM_SPACE = "\u2581";

function readHeader(bytes: Uint8Array, source: string): Result<Llama2cConfig> {
  if (bytes.length < HEADER_INTS * 4) return err(`${source}: too short for a llama2.c checkpoint (${bytes.length} bytes)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, HEADER_INTS * 4);
  const [dim, hiddenDim, numLayers, numHeads, numKvHeads, vocab, seqLen] = Array.from({ length: HEADER_INTS }, (_, i) => view.getInt32(4 * i, true));
  const config = { dim: dim!, hiddenDim: hiddenDim!, numLayers: numLayers!, numHeads: numHeads!, numKvHeads: numKvHeads!, vocabSize: Math.abs(vocab!), seqLen: seqLen!, sharedClassifier: vocab! > 0 };
  const positive = [config.dim, config.hiddenDim, config.numLayers, config.numHeads, config.numKvHeads, config.vocabSize, config.seqLen];
  if (positive.some((v) => v <= 0 || v > 1 << 24)) return err(`${source}: not a llama2.c legacy checkpoint (header ${positive.join(", ")})`);
  if (config.dim % config.numHeads !== 0 || config.numHeads % config.numKvHeads !== 0) {
    return err(`${source}: inconsistent llama2.c header: dim ${config.dim}, ${config.numHeads} heads, ${config.numKvHeads} kv heads`);
  }
  return ok(config);
}

/** Float count of each part in file order, with the GGUF tensor it becomes (null: skipped). */
function layoutOf(c: Llama2cConfig): { key: TensorKey | null; perLayer: boolean; shape: number[] }[] {
  const headSize = c.dim / c.numHeads;
  const kvDim = headSize * c.numKvHeads;
  const parts: { key: TensorKey | null; perLayer: boolean; shape: number[] }[] = [
    { key: "tokenEmbd", perLayer: false, shape: [c.dim, c.vocabSize] },
    { key: "attnNorm", perLayer: true, shape: [c.dim] },
    { key: "attnQ", perLayer: true, shape: [c.dim, c.dim] },
    { key: "attnK", perLayer: true, shape: [c.dim, kvDim] },
    { key: "attnV", perLayer: true, shape: [c.dim, kvDim] },
    { key: "attnOutput", perLayer: true, shape: [c.dim, c.dim] },
    { key: "ffnNorm", perLayer: true, shape: [c.dim] },
    { key: "ffnGate", perLayer: true, shape: [c.dim, c.hiddenDim] }, // w1
    { key: "ffnDown", perLayer: true, shape: [c.hiddenDim, c.dim] }, // w2
    { key: "ffnUp", perLayer: true, shape: [c.dim, c.hiddenDim] }, // w3
    { key: "outputNorm", perLayer: false, shape: [c.dim] },
    { key: null, perLayer: false, shape: [c.seqLen * headSize / 2, 2] }, // freq_cis real + imag
  ];
  if (!c.sharedClassifier) parts.push({ key: "output", perLayer: false, shape: [c.dim, c.vocabSize] });
  return parts;
}

/**
 * The checkpoint's tensors as GGUF tensors (F32, zero-copy views where the bytes are 4-aligned).
 * Tensors come out grouped per layer (blk.0.*, blk.1.*, ...) like llama.cpp's converters write them.
 */
function readLlama2cCheckpoint(bytes: Uint8Array, source: string): Result<{ config: Llama2cConfig; tensors: GgufTensorToWrite[] }> {
  const header = readHeader(bytes, source);
  if (!header.ok) return header;
  const config = header.value;
  const parts = layoutOf(config);
  const floats = parts.reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1) * (p.perLayer ? config.numLayers : 1), 0);
  const expectedBytes = HEADER_INTS * 4 + 4 * floats;
  if (bytes.length !== expectedBytes) {
    return err(`${source}: size ${bytes.length} bytes does not match its llama2.c header (expected ${expectedBytes}: dim ${config.dim}, hidden ${config.hiddenDim}, ${config.numLayers} layers, vocab ${config.vocabSize}, seq ${config.seqLen})`);
  }
  const global: GgufTensorToWrite[] = [];
  const perLayer: GgufTensorToWrite[][] = Array.from({ length: config.numLayers }, () => []);
  let at = HEADER_INTS * 4;
  for (const part of parts) {
    const size = 4 * part.shape.reduce((a, b) => a * b, 1);
    for (let layer = 0; layer < (part.perLayer ? config.numLayers : 1); layer++) {
      if (part.key !== null) {
        const data = bytes.slice(at, at + size); // a copy: 4-aligned and independent of the input buffer
        const t = { name: tensorName(part.key, part.perLayer ? layer : undefined), shape: part.shape, type: GgmlType.F32, data };
        (part.perLayer ? perLayer[layer]! : global).push(t);
      }
      at += size;
    }
  }
  const [embd, outputNorm, output] = [global.find((t) => t.name === tensorName("tokenEmbd")), global.find((t) => t.name === tensorName("outputNorm")), global.find((t) => t.name === tensorName("output"))];
  const tensors = [embd!, ...perLayer.flat(), outputNorm!, ...(output ? [output] : [])];
  return ok({ config, tensors });
}

/** tokenizer.bin -> SentencePiece-style pieces and scores. */
function readLlama2cTokenizer(bytes: Uint8Array, vocabSize: number, source: string): Result<Llama2cTokenizer> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  const tokens: string[] = [];
  const scores: number[] = [];
  let at = 4; // skip max_token_length
  for (let id = 0; id < vocabSize; id++) {
    if (at + 8 > bytes.length) return err(`${source}: truncated at token ${id} of ${vocabSize}`);
    const score = view.getFloat32(at, true);
    const length = view.getInt32(at + 4, true);
    at += 8;
    if (length < 0 || at + length > bytes.length) return err(`${source}: token ${id} has a bad length ${length}`);
    let piece: string;
    try {
      piece = decoder.decode(bytes.subarray(at, at + length));
    } catch {
      return err(`${source}: token ${id} is not valid UTF-8`);
    }
    at += length;
    tokens.push(piece);
    scores.push(score);
  }
  if (at !== bytes.length) return err(`${source}: ${bytes.length - at} bytes left after ${vocabSize} tokens (wrong tokenizer for this model?)`);
  return ok({ tokens, scores });
}

const SPECIAL_PIECES: readonly [number, string, TokenType][] = [
  [0, "<unk>", TokenType.UNKNOWN],
  [1, "<s>", TokenType.CONTROL],
  [2, "</s>", TokenType.CONTROL],
];
const BYTE_PIECE = /^<0x[0-9A-F]{2}>$/;

function tokenizerMetadata(tok: Llama2cTokenizer): [string, GgufMetadataEntry][] {
  const tokens = tok.tokens.map((t) => t.replaceAll(" ", SPM_SPACE));
  const types: TokenType[] = tokens.map((t) => (BYTE_PIECE.test(t) ? TokenType.BYTE : TokenType.NORMAL));
  for (const [id, piece, type] of SPECIAL_PIECES) {
    tokens[id] = piece;
    types[id] = type;
  }
  return [
    [KEY.tokenizerModel, mdString("llama")],
    [KEY.tokenizerPre, mdString("default")],
    [KEY.tokens, mdArray(GgufValueType.STRING, tokens)],
    [KEY.scores, mdArray(GgufValueType.FLOAT32, tok.scores)],
    [KEY.tokenType, mdArray(GgufValueType.INT32, types)],
    [KEY.bosId, mdU32(1)],
    [KEY.eosId, mdU32(2)],
    [KEY.unkId, mdU32(0)],
    [KEY.addBos, mdBool(true)],
    [KEY.addEos, mdBool(false)],
  ];
}

/**
 * The whole conversion: checkpoint + tokenizer bytes -> a GGUF to write (F32, arch llama, tied if the checkpoint is).
 * @example const gguf = convertLlama2c(model, tok, "stories260K"); if (gguf.ok) writeGgufFile(out, gguf.value);
 */
export function convertLlama2c(checkpoint: Uint8Array, tokenizer: Uint8Array, name: string, sources = { checkpoint: "checkpoint", tokenizer: "tokenizer" }): Result<GgufToWrite> {
  const model = readLlama2cCheckpoint(checkpoint, sources.checkpoint);
  if (!model.ok) return model;
  const c = model.value.config;
  const tok = readLlama2cTokenizer(tokenizer, c.vocabSize, sources.tokenizer);
  if (!tok.ok) return tok;
  const arch = "llama";
  const metadata = new Map<string, GgufMetadataEntry>([
    [KEY.architecture, mdString(arch)],
    [KEY.name, mdString(name)],
    [archKey(arch, "contextLength"), mdU32(c.seqLen)],
    [archKey(arch, "embeddingLength"), mdU32(c.dim)],
    [archKey(arch, "blockCount"), mdU32(c.numLayers)],
    [archKey(arch, "feedForwardLength"), mdU32(c.hiddenDim)],
    [archKey(arch, "ropeDimensionCount"), mdU32(c.dim / c.numHeads)],
    [archKey(arch, "headCount"), mdU32(c.numHeads)],
    [archKey(arch, "headCountKv"), mdU32(c.numKvHeads)],
    [archKey(arch, "rmsEps"), mdF32(LLAMA2C_RMS_EPS)],
    [archKey(arch, "ropeFreqBase"), mdF32(LLAMA2C_ROPE_FREQ_BASE)],
    [KEY.fileType, mdU32(FILE_TYPE.f32!)],
    ...tokenizerMetadata(tok.value),
  ]);
  return ok({ metadata, tensors: model.value.tensors });
}
