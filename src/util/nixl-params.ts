/**
 * The prefill leg's `kv_transfer_params` of vLLM's disaggregated serving, exactly as its proxies send them
 * (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py send_request_to_service): the prefill server computes
 * the prompt, keeps its KV blocks for a decode server, and answers the params that name them. One table for the
 * proxy (server/pd-proxy.ts) and a pipeline stage in another process (pipeline/remote-prefill-stage.ts).
 */
export const PREFILL_KV_TRANSFER_PARAMS = {
  do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null,
} as const;
