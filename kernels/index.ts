// The kernel ABI: every export is a plain function over byte addresses in the one shared memory (no allocation,
// no managed objects). One source gives three builds (scalar, SIMD, relaxed SIMD) through ASC_FEATURE_* constants.
export { quantize_q8, quantize_q8k, splat_q8, splat_q8_i16, splat_q8_one, splat_q8_signed_one, quad_sums, widen_q8 } from "./quantize";
export { matmul_quant } from "./matmul-quant";
export { matmul_f32 } from "./matmul-f32";
export { kv_store_f16, kv_store_q8 } from "./kv-store";
export { attention_f16, attention_q8, attention_merge, attention_segment_keys, attention_tile_rows, attention_scratch_floats } from "./attention";
export { rms_norm, rope_table, rope, silu_mul, gelu_mul, scale, add, add_bias } from "./elementwise";
export { dequant_row } from "./dequant";
export { swiglu_oai } from "./swiglu-oai";
export { stream_read } from "./stream";
export { lora_delta, lora_group_rows } from "./lora";
export { matmul_experts, weighted_row_sum } from "./moe-experts";

/** First free byte after the module's static data: the host lays its buffers out from here. */
export function heap_base(): usize {
  return __heap_base;
}

/** Which build this is: 0 scalar, 1 SIMD, 2 relaxed SIMD. */
export function simd_level(): i32 {
  return ASC_FEATURE_RELAXED_SIMD ? 2 : ASC_FEATURE_SIMD ? 1 : 0;
}
