/**
 * `npx bun run make-model -- --shape S --type T --out F [--seed N] [--layers N] [--dim N] [--ffn N] [--heads N]
 * [--kv-heads N] [--head-dim N] [--context N] [--mmproj FILE] [--vision-layers N]`: writes a GGUF of seeded random
 * weights in a real model's shape (see scripts/model-shapes.ts) with its real tokenizer metadata; see
 * scripts/random-model.ts for the weights and types. A vision-language shape (VISION_SHAPES) also writes its
 * projector GGUF to --mmproj (f16, as llama.cpp's converter; scripts/random-mmproj.ts).
 * Generated files are never committed (*.gguf is gitignored). A progress bar shows on a TTY.
 *
 * `--lora-out FILE [--lora-rank N] [--lora-alpha X] [--lora-targets attn_q,...] [--lora-type f32|f16]` also (or, without
 * --type / --out, only) writes a LoRA adapter of seeded random A and B for the shape, as llama.cpp's
 * convert_lora_to_gguf.py lays one out (scripts/random-lora.ts); the shape flags must match the base's.
 */
import { readGguf } from "../src/gguf/reader.ts";
import { writeGgufFile } from "../src/gguf/writer.ts";
import { WEIGHT_TYPES } from "../src/tensor/dtypes.ts";
import { createProgressBar } from "../src/util/progress.ts";
import { MODEL_SHAPES, VISION_SHAPES, vocabPath, type ModelShape } from "./model-shapes.ts";
import { randomMmproj } from "./random-mmproj.ts";
import { randomLora } from "./random-lora.ts";
import { MIXED_TYPES, randomModel } from "./random-model.ts";

const TYPES = [...WEIGHT_TYPES.map((w) => w.name), ...MIXED_TYPES];
/** integer overrides of the shape, flag -> field */
const OVERRIDES: Readonly<Record<string, keyof ModelShape>> = {
  layers: "numLayers", dim: "dim", ffn: "hiddenDim", heads: "numHeads", "kv-heads": "numKvHeads", "head-dim": "headDim", context: "contextLength",
};
/** vision-language shapes only: where the projector goes, and its layer count */
const VISION_FLAGS = ["mmproj", "vision-layers"];
/** a LoRA adapter for the shape (random-lora.ts) */
const LORA_FLAGS = ["lora-out", "lora-rank", "lora-alpha", "lora-targets", "lora-type"];
const LORA_DEFAULT_RANK = 8;
const LORA_DEFAULT_ALPHA = 16;
const USAGE = `usage: make-model --shape ${Object.keys(MODEL_SHAPES).join("|")} --type ${TYPES.join("|")} --out FILE [--seed N] ${Object.keys(OVERRIDES).map((f) => `[--${f} N]`).join(" ")} [--mmproj FILE] [--vision-layers N] [--lora-out FILE [--lora-rank N] [--lora-alpha X] [--lora-targets attn_q,attn_k,...] [--lora-type f32|f16]]`;

class UsageError extends Error {}

function parse(argv: string[]): Map<string, string> {
  const args = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === "--help" || flag === "-h") throw new UsageError(USAGE);
    if (!flag.startsWith("--")) throw new UsageError(`unexpected argument "${flag}"\n${USAGE}`);
    const value = argv[++i];
    if (value === undefined) throw new UsageError(`${flag} needs a value`);
    args.set(flag.slice(2), value);
  }
  const known = new Set(["shape", "type", "out", "seed", ...Object.keys(OVERRIDES), ...VISION_FLAGS, ...LORA_FLAGS]);
  for (const name of args.keys()) if (!known.has(name)) throw new UsageError(`unknown flag --${name}\n${USAGE}`);
  return args;
}

function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`--${flag} must be a positive integer (got "${value}")`);
  return n;
}

function main(argv: string[]): number {
  const args = parse(argv);
  const shapeName = args.get("shape");
  const type = args.get("type")?.toLowerCase();
  const out = args.get("out");
  const loraOnly = args.has("lora-out") && type === undefined && out === undefined;
  if (shapeName === undefined || (!loraOnly && (type === undefined || out === undefined))) throw new UsageError(`--shape, --type and --out (or --lora-out alone) are required\n${USAGE}`);
  const base = MODEL_SHAPES[shapeName];
  if (base === undefined) throw new UsageError(`unknown shape "${shapeName}" (known: ${Object.keys(MODEL_SHAPES).join(", ")})`);
  if (type !== undefined && !TYPES.includes(type)) throw new UsageError(`unknown type "${type}" (known: ${TYPES.join(", ")})`);
  const seed = args.has("seed") ? Number(args.get("seed")) : 0;
  if (!Number.isInteger(seed)) throw new UsageError(`--seed must be an integer (got "${args.get("seed")}")`);
  let shape: ModelShape = base;
  for (const [flag, field] of Object.entries(OVERRIDES)) {
    const value = args.get(flag);
    if (value !== undefined) shape = { ...shape, [field]: positiveInt(flag, value) };
  }
  // keep head size = dim / heads when only those change (qwen3 keeps its explicit wider head)
  if ((args.has("dim") || args.has("heads")) && !args.has("head-dim") && base.headDim === base.dim / base.numHeads) {
    shape = { ...shape, headDim: shape.dim / shape.numHeads };
  }
  if (!Number.isInteger(shape.headDim) || shape.numHeads % shape.numKvHeads !== 0) {
    throw new UsageError(`inconsistent shape: dim ${shape.dim}, ${shape.numHeads} heads, ${shape.numKvHeads} kv heads, head size ${shape.headDim}`);
  }
  if (args.has("lora-out")) writeLora(shapeName, shape, seed, args);
  if (loraOnly || type === undefined || out === undefined) return 0;
  const vision = visionPart(shapeName, args);
  const vocab = readGguf(vocabPath(shape.vocab));
  if (!vocab.ok) throw new UsageError(vocab.error);
  const t0 = performance.now();
  const bar = createProgressBar(`make-model ${shapeName} ${type}`, { minTotal: 0 });
  const bytes = writeGgufFile(out, randomModel({ shapeName, shape, type, seed, vocab: vocab.value }), (done, total) => bar.update(done, total));
  bar.done();
  console.error(`make-model: wrote ${out} (${(bytes / 1e6).toFixed(1)} MB, ${shapeName}, ${type}, seed ${seed}) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  if (vision !== null) {
    const t1 = performance.now();
    const mmprojBytes = writeGgufFile(vision.path, randomMmproj({ shapeName, vision: vision.shape, textDim: shape.dim, seed }));
    console.error(`make-model: wrote ${vision.path} (${(mmprojBytes / 1e6).toFixed(1)} MB, ${shapeName} projector, ${vision.shape.numLayers} layers, f16) in ${((performance.now() - t1) / 1000).toFixed(1)} s`);
  }
  return 0;
}

/** Writes --lora-out: a random adapter for `shape` (random-lora.ts). */
function writeLora(shapeName: string, shape: ModelShape, seed: number, args: Map<string, string>): void {
  const path = args.get("lora-out")!;
  if (shape.architecture === "phi3") throw new UsageError("--lora-out: phi3's fused attn_qkv has no LoRA target here");
  const rank = args.has("lora-rank") ? positiveInt("lora-rank", args.get("lora-rank")!) : LORA_DEFAULT_RANK;
  const alphaText = args.get("lora-alpha");
  const alpha = alphaText === undefined ? LORA_DEFAULT_ALPHA : Number(alphaText);
  if (!Number.isFinite(alpha) || alpha <= 0) throw new UsageError(`--lora-alpha must be a positive number (got "${alphaText}")`);
  const loraType = args.get("lora-type") ?? "f32";
  if (loraType !== "f32" && loraType !== "f16") throw new UsageError(`--lora-type must be f32 or f16 (got "${loraType}")`);
  const targets = args.get("lora-targets")?.split(",").map((t) => t.trim());
  let adapter;
  try {
    adapter = randomLora({
      architecture: shape.architecture, numLayers: shape.numLayers, dims: shape, moe: shape.moe !== undefined,
      rank, alpha, targets, seed, type: loraType,
    });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const t0 = performance.now();
  const bytes = writeGgufFile(path, adapter);
  console.error(`make-model: wrote ${path} (${(bytes / 1e6).toFixed(1)} MB, LoRA for ${shapeName}, rank ${rank}, alpha ${alpha}, ${adapter.tensors.length / 2} targets, seed ${seed}) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

/** The projector to write with a vision-language shape (--mmproj required), null for a text shape (--mmproj refused). */
function visionPart(shapeName: string, args: Map<string, string>): { path: string; shape: (typeof VISION_SHAPES)[string] } | null {
  const base = VISION_SHAPES[shapeName];
  const path = args.get("mmproj");
  if (base === undefined) {
    const given = VISION_FLAGS.find((f) => args.has(f));
    if (given !== undefined) throw new UsageError(`--${given} needs a vision-language shape (${Object.keys(VISION_SHAPES).join(", ")})`);
    return null;
  }
  if (path === undefined) throw new UsageError(`shape ${shapeName} is a vision-language model: --mmproj FILE (its projector GGUF) is required`);
  const layers = args.get("vision-layers");
  return { path, shape: layers === undefined ? base : { ...base, numLayers: positiveInt("vision-layers", layers) } };
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof UsageError)) throw e;
  console.error(`make-model: ${e.message}`);
  process.exitCode = 2;
}
