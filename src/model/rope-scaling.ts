/**
 * RoPE scaling: the `<arch>.rope.scaling.*` keys as llama.cpp reads them for every architecture
 * (src/llama-model.cpp, load_hparams; src/llama-context.cpp, the yarn_attn_factor rules) and the angle table they
 * give (ggml-cpu/ops.cpp, ggml_rope_cache_init + rope_yarn; ggml.c, ggml_rope_yarn_corr_dims).
 *
 * Every scaling type keeps theta linear in the position, so one table of radians per position and one magnitude cover
 * them all: theta_i = pos * base^(-2i/d) / f_i, then
 *   linear:   theta *= freqScale                      (freqScale = 1 / rope.scaling.factor)
 *   yarn:     theta = theta * (freqScale * (1 - r_i) + r_i), r_i ramps from 1 (fast dims) to 0 (slow dims)
 *   longrope, Llama 3: freqScale 1; the per-dim divisors f_i come from a tensor (rope_factors_* / rope_freqs)
 * and mscale = rope.scaling.attn_factor (x (1 + 0.1 ln factor) for yarn).
 */
import type { RopeAngles } from "../backend/backend.ts";
import type { GgufFile } from "../gguf/gguf-file.ts";
import { archKey } from "../gguf/names.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { ModelConfig, RopeScaling, RopeScalingType } from "./model-config.ts";

/** llama.cpp's LLAMA_ROPE_SCALING_TYPES names (rope.scaling.type; absent = "linear", which with no factor is none). */
export const ROPE_SCALING_TYPES: readonly RopeScalingType[] = ["none", "linear", "yarn", "longrope"];

/** No scaling (the default of a config without rope.scaling.*). */
export const NO_ROPE_SCALING: RopeScaling = { type: "none", freqScale: 1, attnFactor: 1, originalContextLength: 1 };

/** llama_hparams defaults; only grok and mistral3 read yarn_beta_* from the file, none of fennec's architectures */
const YARN_BETA_FAST = 32;
const YARN_BETA_SLOW = 1;

/** A float key as a number, or undefined when absent. */
function floatKey(gguf: GgufFile, key: string): Result<number | undefined> {
  const entry = gguf.metadata.get(key);
  if (entry === undefined) return ok(undefined);
  const v = entry.value;
  if (typeof v === "number" && Number.isFinite(v)) return ok(v);
  if (typeof v === "bigint") return ok(Number(v));
  return err(`${gguf.source}: metadata ${key} is not a number`);
}

/**
 * Reads `<prefix>.rope.scaling.*`; an unknown type is one error naming the types there are.
 * @example readRopeScaling(gguf, "llama", 131072) // ok({ type: "linear", freqScale: 1, attnFactor: 1, ... })
 */
export function readRopeScaling(gguf: GgufFile, prefix: string, contextLength: number): Result<RopeScaling> {
  const typeKey = archKey(prefix, "ropeScalingType");
  const typeValue = gguf.metadata.get(typeKey)?.value ?? "linear";
  const type = ROPE_SCALING_TYPES.find((t) => t === typeValue);
  if (type === undefined) {
    return err(`${gguf.source}: metadata ${typeKey} "${String(typeValue)}" is not supported (supported: ${ROPE_SCALING_TYPES.join(", ")})`);
  }
  let factor = floatKey(gguf, archKey(prefix, "ropeScalingFactor"));
  if (factor.ok && factor.value === undefined) factor = floatKey(gguf, archKey(prefix, "ropeScaleLinear"));
  if (!factor.ok) return factor;
  const attnFactor = floatKey(gguf, archKey(prefix, "ropeScalingAttnFactor"));
  if (!attnFactor.ok) return attnFactor;
  const original = floatKey(gguf, archKey(prefix, "ropeScalingOriginalContextLength"));
  if (!original.ok) return original;
  const f = factor.value ?? 0;
  if (f < 0) return err(`${gguf.source}: metadata ${archKey(prefix, "ropeScalingFactor")} must not be negative (got ${f})`);
  const originalContextLength = original.value ?? contextLength;
  if (!Number.isInteger(originalContextLength) || originalContextLength <= 0) {
    return err(`${gguf.source}: metadata ${archKey(prefix, "ropeScalingOriginalContextLength")} must be a positive integer (got ${originalContextLength})`);
  }
  return ok({
    type,
    // llama.cpp: rope_freq_scale_train = factor == 0 ? 1 : 1 / factor; type none never scales
    freqScale: type === "none" || f === 0 ? 1 : 1 / f,
    attnFactor: attnFactor.value ?? 1,
    originalContextLength,
  });
}

/** ggml_rope_yarn_corr_dim: the dim index whose wavelength fits `numRotations` turns into the original context */
function yarnCorrDim(ropeDim: number, originalContext: number, numRotations: number, base: number): number {
  return (ropeDim * Math.log(originalContext / (numRotations * 2 * Math.PI))) / (2 * Math.log(base));
}

/**
 * The angle table of a model: `factors` are the per-dim divisors (rope_freqs / rope_factors_*), null for none.
 * @example backend.rope(q, positions, numHeads, headDim, ropeAngles(config, null), config.ropeNeox)
 */
export function ropeAngles(
  c: { readonly ropeDim: number; readonly ropeFreqBase: number; readonly ropeScaling?: RopeScaling },
  factors: Float32Array | null,
): RopeAngles {
  const { ropeDim, ropeFreqBase: base } = c;
  const s = c.ropeScaling ?? NO_ROPE_SCALING;
  const half = ropeDim / 2;
  if (factors !== null && factors.length < half) throw new Error(`rope factors: ${factors.length} values, the rope needs ${half}`);
  const yarn = s.type === "yarn";
  // ggml_rope_yarn_corr_dims: the ramp between the dims kept (extrapolated) and the dims interpolated
  const low = Math.max(0, Math.floor(yarnCorrDim(ropeDim, s.originalContextLength, YARN_BETA_FAST, base)));
  const high = Math.min(ropeDim - 1, Math.ceil(yarnCorrDim(ropeDim, s.originalContextLength, YARN_BETA_SLOW, base)));
  const thetas = new Float64Array(half);
  for (let i = 0; i < half; i++) {
    const extrapolated = Math.pow(base, (-2 * i) / ropeDim) / (factors === null ? 1 : factors[i]!);
    const interpolated = s.freqScale * extrapolated;
    // rope_yarn_ramp(low, high, i0 = 2i): 1 - clamp((i - low) / max(0.001, high - low), 0, 1)
    const ramp = yarn ? 1 - Math.min(1, Math.max(0, (i - low) / Math.max(0.001, high - low))) : 0;
    thetas[i] = interpolated * (1 - ramp) + extrapolated * ramp;
  }
  // llama-context.cpp: yarn_attn_factor = get_mscale(factor) / (1 + 0.1 ln factor), times rope_attn_factor, and rope_yarn
  // multiplies by (1 + 0.1 ln factor) again: attn_factor * get_mscale(factor) in all
  const factor = 1 / s.freqScale;
  const mscale = s.attnFactor * (yarn && factor > 1 ? 1 + 0.1 * Math.log(factor) : 1);
  return { ropeDim, thetas, mscale };
}

/**
 * Each layer's angle table, or null where the layer has no rope (smollm3's every 4th). Global layers use the model's
 * base, scaling and divisors; gemma3's sliding-window layers use rope.freq_base_swa with freq_scale 1 and no divisors
 * (llama.cpp get_rope_freq_base / get_rope_freq_scale: rope_freq_scale_train_swa = 1). Layers that share a table share
 * the object, so a backend's cache of cos/sin tables holds one per distinct table.
 * @example const angles = layerRopeAngles(config, null); if (angles[l]) backend.rope(q, positions, h, d, angles[l], neox);
 */
export function layerRopeAngles(config: ModelConfig, factors: Float32Array | null): (RopeAngles | null)[] {
  const global = ropeAngles(config, factors);
  const sliding = config.slidingLayers?.some((s) => s) === true
    ? ropeAngles({ ropeDim: config.ropeDim, ropeFreqBase: config.ropeFreqBaseSwa ?? config.ropeFreqBase, ropeScaling: { ...(config.ropeScaling ?? NO_ROPE_SCALING), freqScale: 1 } }, null)
    : global;
  const step = config.noRopeLayerStep ?? 0;
  return Array.from({ length: config.numLayers }, (_, l) => {
    if (step > 0 && (l + 1) % step === 0) return null;
    return config.slidingLayers?.[l] === true ? sliding : global;
  });
}
