/**
 * `--kv-cache-dtype` as vLLM names it (vllm/config/cache.py CacheDType): the values fennec has a KV cache for, and the
 * refusal of the rest, saying what fennec has.
 */
import { err, ok, type Result } from "../util/result.ts";

/** The --kv-cache-dtype values fennec serves: auto and float16 are the f16 cache, fp8 and fp8_e4m3 the 8-bit one. */
export type KvCacheDtypeName = "auto" | "float16" | "fp8" | "fp8_e4m3";

/** vLLM's CacheDType values (vllm/config/cache.py) and the ones fennec implements. */
const KV_CACHE_DTYPES_SERVED: readonly KvCacheDtypeName[] = ["auto", "float16", "fp8", "fp8_e4m3"];
const KV_CACHE_DTYPES_VLLM = [
  "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc",
  "turboquant_k3v4_nc", "turboquant_3bit_nc", "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
];

/** --kv-cache-dtype: vLLM's names; what fennec has no cache for is refused, saying what it has. */
export function kvCacheDtypeOf(raw: string, device: "cpu" | "webgpu"): Result<KvCacheDtypeName> {
  if (!(KV_CACHE_DTYPES_SERVED as readonly string[]).includes(raw)) {
    if (KV_CACHE_DTYPES_VLLM.includes(raw)) return err(`--kv-cache-dtype ${raw} is not supported by fennec; use auto (f16) or fp8 / fp8_e4m3 (fennec's 8-bit cache)`);
    return err(`--kv-cache-dtype must be one of ${KV_CACHE_DTYPES_VLLM.join(", ")} (got "${raw}")`);
  }
  const dtype = raw as KvCacheDtypeName;
  if (device === "webgpu" && (dtype === "fp8" || dtype === "fp8_e4m3")) {
    return err("--kv-cache-dtype fp8 is not supported with --device webgpu (fennec's 8-bit KV cache has WASM kernels only); use --kv-cache-dtype auto or --device cpu");
  }
  return ok(dtype);
}
