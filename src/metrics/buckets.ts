/**
 * vLLM's histogram bucket families (vllm/v1/metrics/loggers.py PrometheusStatLogger, vllm/v1/metrics/buckets.py), one row each. Token-count histograms use the
 * 1-2-5 series capped at max_model_len, computed by `tokenBuckets`.
 */
export type BucketFamily =
  | "request_latency"
  | "time_to_first_token"
  | "inter_token_latency"
  | "iteration_tokens"
  | "request_params_n"
  | "request_tokens"
  | "http_duration_highr"
  | "http_duration"
  | "kv_offload_size"
  | "kv_offload_lookup_sync"
  | "kv_offload_lookup_async"
  | "kv_offload_allocation"
  | "nixl_xfer_time"
  | "nixl_post_time"
  | "nixl_bytes"
  | "nixl_descriptors";

/** Fixed families; `request_tokens` depends on max_model_len and is filled by `bucketsFor`. */
const FIXED_BUCKETS: Readonly<Record<Exclude<BucketFamily, "request_tokens">, readonly number[]>> = {
  request_latency: [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0],
  time_to_first_token: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0],
  inter_token_latency: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0],
  iteration_tokens: [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
  request_params_n: [1, 2, 5, 10, 20],
  // prometheus-fastapi-instrumentator's defaults (the HTTP metrics vLLM mounts)
  http_duration_highr: [0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60],
  http_duration: [0.1, 0.5, 1],
  // OffloadingConnector (vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py)
  kv_offload_size: [1e6, 5e6, 10e6, 20e6, 40e6, 60e6, 80e6, 100e6, 150e6, 200e6],
  kv_offload_lookup_sync: [1e-5, 5e-5, 1e-4, 5e-4, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
  kv_offload_lookup_async: [1e-4, 5e-4, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
  kv_offload_allocation: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144],
  // NixlConnector (vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py)
  nixl_xfer_time: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0],
  nixl_post_time: [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0],
  nixl_bytes: [2 ** 11, 2 ** 13, 2 ** 15, 2 ** 17, 2 ** 19, 2 ** 21, 2 ** 23, 2 ** 25, 2 ** 27, 2 ** 29, 2 ** 31, 2 ** 33],
  nixl_descriptors: [10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000],
};

/**
 * vLLM's `build_1_2_5_buckets`: 1, 2, 5, 10, 20, 50, ... stopping at the first value above `maxModelLen` (which is not
 * added, and neither is maxModelLen itself).
 * @example tokenBuckets(1024) // [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
 */
export function tokenBuckets(maxModelLen: number): number[] {
  const buckets: number[] = [];
  for (let exponent = 0; ; exponent++) {
    for (const mantissa of [1, 2, 5]) {
      const value = mantissa * 10 ** exponent;
      if (value > maxModelLen) return buckets;
      buckets.push(value);
    }
  }
}

export function bucketsFor(family: BucketFamily, maxModelLen: number): readonly number[] {
  return family === "request_tokens" ? tokenBuckets(maxModelLen) : FIXED_BUCKETS[family];
}
