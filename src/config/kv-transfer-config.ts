/**
 * The KV offload tier's configuration, read from vLLM's flags: `--kv-offloading-size` / `--kv-offloading-backend`
 * (vllm/config/vllm.py::_post_init_kv_transfer_config: native -> OffloadingConnector, or SimpleCPUOffloadConnector with
 * VLLM_USE_SIMPLE_KV_OFFLOAD=1) and `--kv-transfer-config` (vllm/config/kv_transfer.py, extra="forbid"), with the
 * connectors' `kv_connector_extra_config` keys, defaults and messages (simple_cpu_offload_connector.py,
 * kv_offload/cpu/spec.py). Pure: the CLI parses here, the engine Worker receives the result in EngineArgs.
 * Keys fennec cannot honour are refused with a line that says so, never accepted and ignored.
 */
import { err, ok, type Result } from "../util/result.ts";

export type KvConnectorName = "OffloadingConnector" | "SimpleCPUOffloadConnector";
export type KvOffloadBackend = "cpu" | "disk";

/** A resolved offload tier (one per engine). */
export interface KvOffloadConfig {
  readonly connector: KvConnectorName;
  readonly backend: KvOffloadBackend;
  /** host-memory tier size in bytes (cpu backend) */
  readonly cpuBytes: number;
  /** SimpleCPUOffloadConnector lazy_offload: store only blocks about to be evicted from the primary pool */
  readonly lazy: boolean;
  /** disk backend: the file is `${diskPath}.rank_0` */
  readonly diskPath: string | null;
  readonly diskCapacityBytes: number;
  readonly diskBufferSlots: number;
  /** disk backend: buffered I/O (true) or O_DIRECT (false, vLLM's default) */
  readonly usePageCache: boolean;
  /** OffloadingConnector offload_prompt_only: decode blocks are not stored */
  readonly offloadPromptOnly: boolean;
  /** the flags as given, for vllm:cache_config_info */
  readonly kvOffloadingSize: number | null;
  readonly kvOffloadingBackend: string | null;
}

export interface KvTransferFlags {
  /** --kv-offloading-size, GiB */
  readonly kvOffloadingSize: number | null;
  /** --kv-offloading-backend */
  readonly kvOffloadingBackend: string;
  /** --kv-transfer-config, raw JSON */
  readonly kvTransferConfig: string | null;
  /** VLLM_USE_SIMPLE_KV_OFFLOAD */
  readonly useSimpleKvOffload: boolean;
  /** VLLM_NIXL_SIDE_CHANNEL_HOST / VLLM_NIXL_SIDE_CHANNEL_PORT as set (null: unset) */
  readonly sideChannelHost?: string | null;
  readonly sideChannelPort?: string | null;
  readonly enablePrefixCaching: boolean;
}

/**
 * fennec's connector between instances, selected with vLLM's name `NixlConnector` (the string deployments pass): the
 * transport is fennec's own TCP side channel (engine/kv-connector/peer-connector.ts), not the NIXL library.
 */
export interface KvPeerConfig {
  readonly connector: "NixlConnector";
  readonly role: "kv_producer" | "kv_consumer" | "kv_both";
  /** engine_id (vLLM: a random uuid4 when not given) */
  readonly engineId: string;
  /** where the side channel listens and what a prefill answer names as remote_host / remote_port (port 0: any free) */
  readonly host: string;
  readonly port: number;
  /** kv_connector_extra_config.kv_lease_duration, seconds: pinned prefill blocks are freed after it */
  readonly leaseSeconds: number;
  /** decode side: a failed load fails the request (vLLM's default) or recomputes the prompt */
  readonly loadFailurePolicy: "fail" | "recompute";
}

export interface ParsedKvTransfer {
  readonly config: KvOffloadConfig | null;
  /** NixlConnector: the connector between instances; null otherwise */
  readonly peer?: KvPeerConfig | null;
  /** vLLM's warnings, printed once at start-up */
  readonly warnings: readonly string[];
}

/** vLLM KVTransferConfig fields; only the ones an offload connector means are taken, the rest are refused. */
const TRANSFER_KEYS = [
  "kv_connector", "engine_id", "kv_buffer_device", "kv_buffer_size", "kv_role", "kv_rank", "kv_parallel_size", "kv_ip",
  "kv_port", "kv_connector_extra_config", "kv_connector_module_path", "enable_permute_local_kv", "kv_load_failure_policy",
] as const;
const KV_ROLES = ["kv_producer", "kv_consumer", "kv_both"] as const;
const CONNECTORS: readonly KvConnectorName[] = ["OffloadingConnector", "SimpleCPUOffloadConnector"];

const GIB = 2 ** 30;
/** SimpleCPUOffloadConnector defaults (vllm/v1/simple_kv_offload) */
const SIMPLE_DEFAULT_CPU_BYTES = 8 * GIB;
const DEFAULT_DISK_CAPACITY_BYTES = 100 * GIB;
const DEFAULT_DISK_BUFFER_SLOTS = 2;
const DISK_ONLY_KEYS = ["disk_path", "disk_capacity_bytes", "disk_buffer_slots", "use_page_cache"] as const;
const SIMPLE_KEYS = ["cpu_bytes_to_use", "cpu_bytes_to_use_per_rank", "lazy_offload", "kv_offload_backend", ...DISK_ONLY_KEYS] as const;
/** OffloadingConnector keys fennec implements with their one supported value (or any value: null) */
const OFFLOADING_KEYS = ["cpu_bytes_to_use", "block_size", "blocks_per_chunk", "spec_name", "eviction_policy", "store_threshold", "offload_prompt_only"] as const;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function positiveNumber(where: string, v: unknown): Result<number> {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) return err(`${where} must be a positive number of bytes (got ${JSON.stringify(v)})`);
  return ok(Math.floor(v));
}

function bool(where: string, v: unknown): Result<boolean> {
  if (typeof v !== "boolean") return err(`${where} must be true or false (got ${JSON.stringify(v)})`);
  return ok(v);
}

/** From the flags to one offload tier, or null when none is configured. `blockSize` is the engine's --block-size. */
export function parseKvTransfer(flags: KvTransferFlags, blockSize: number): Result<ParsedKvTransfer> {
  const warnings: string[] = [];
  let transfer: Json | null = null;
  if (flags.kvTransferConfig !== null) {
    let raw: unknown;
    try {
      raw = JSON.parse(flags.kvTransferConfig);
    } catch (e) {
      return err(`--kv-transfer-config is not valid JSON: ${(e as Error).message}`);
    }
    if (!isObject(raw)) return err("--kv-transfer-config must be a JSON object");
    transfer = raw;
  }
  if (flags.kvOffloadingSize !== null) {
    if (flags.kvOffloadingBackend === "lmcache") return err("--kv-offloading-backend lmcache needs an LMCache server, which fennec does not have; use --kv-offloading-backend native");
    if (flags.kvOffloadingBackend !== "native") return err(`--kv-offloading-backend must be one of native, lmcache (got "${flags.kvOffloadingBackend}")`);
    if (transfer !== null && transfer["kv_connector"] !== undefined) {
      return err("--kv-offloading-size and --kv-transfer-config's kv_connector both choose a KV connector; give one of them");
    }
    const cpuBytes = Math.floor(flags.kvOffloadingSize * GIB);
    const connector: KvConnectorName = flags.useSimpleKvOffload ? "SimpleCPUOffloadConnector" : "OffloadingConnector";
    const extra = { ...(isObject(transfer?.["kv_connector_extra_config"]) ? transfer!["kv_connector_extra_config"] as Json : {}), cpu_bytes_to_use: cpuBytes };
    transfer = { ...(transfer ?? {}), kv_connector: connector, kv_role: "kv_both", kv_connector_extra_config: extra };
  }
  if (transfer === null) return ok({ config: null, warnings });

  for (const key of Object.keys(transfer)) {
    if (!(TRANSFER_KEYS as readonly string[]).includes(key)) return err(`--kv-transfer-config: unknown field "${key}" (fields: ${TRANSFER_KEYS.join(", ")})`);
  }
  const connector = transfer["kv_connector"];
  const role = transfer["kv_role"];
  if (role !== undefined && role !== null && !(KV_ROLES as readonly unknown[]).includes(role)) {
    return err(`Unsupported kv_role: ${String(role)}. Supported roles are ('kv_producer', 'kv_both', 'kv_consumer')`);
  }
  if (connector === undefined || connector === null) {
    if (Object.keys(transfer).length === 0) return ok({ config: null, warnings });
    return err("--kv-transfer-config: kv_connector is required (fennec's connectors: OffloadingConnector, SimpleCPUOffloadConnector)");
  }
  if (connector === "NixlConnector") {
    if (role === undefined || role === null) return err("Please specify kv_role when kv_connector is set, supported roles are ('kv_producer', 'kv_both', 'kv_consumer')");
    const peer = parsePeer(transfer, role as KvPeerConfig["role"], flags, warnings);
    if (!peer.ok) return peer;
    return ok({ config: null, peer: peer.value, warnings });
  }
  if (typeof connector !== "string" || !(CONNECTORS as readonly string[]).includes(connector)) {
    return err(`--kv-transfer-config: fennec has no kv_connector ${JSON.stringify(connector)}; it implements ${[...CONNECTORS, "NixlConnector"].join(", ")} (the KV offload tier; NixlConnector: fennec's own TCP transport between instances)`);
  }
  if (role === undefined || role === null) return err("Please specify kv_role when kv_connector is set, supported roles are ('kv_producer', 'kv_both', 'kv_consumer')");
  if (role !== "kv_both") return err(`--kv-transfer-config: ${connector} stores and loads KV, so kv_role must be kv_both (got ${String(role)})`);
  for (const key of ["kv_rank", "kv_parallel_size", "kv_ip", "kv_port", "kv_buffer_size", "kv_connector_module_path", "enable_permute_local_kv"]) {
    if (transfer[key] !== undefined) return err(`--kv-transfer-config: ${key} is for connectors between processes; ${connector} does not use it, remove it`);
  }
  const device = transfer["kv_buffer_device"];
  if (device !== undefined && device !== "cpu") return err(`--kv-transfer-config: kv_buffer_device must be cpu on fennec (got ${JSON.stringify(device)})`);
  const policy = transfer["kv_load_failure_policy"];
  if (policy !== undefined && policy !== "recompute") {
    return err(`--kv-transfer-config: kv_load_failure_policy ${JSON.stringify(policy)} is not supported: fennec's offload tier always recomputes blocks whose load failed ("recompute")`);
  }
  const extraRaw = transfer["kv_connector_extra_config"] ?? {};
  if (!isObject(extraRaw)) return err("--kv-transfer-config: kv_connector_extra_config must be a JSON object");
  if (!flags.enablePrefixCaching) {
    warnings.push("Detected prefix caching disabled, disabling CPU offload since it requires prefix caching.");
    return ok({ config: null, warnings });
  }
  const parsed = connector === "SimpleCPUOffloadConnector" ? parseSimple(extraRaw, warnings) : parseOffloading(extraRaw, blockSize);
  if (!parsed.ok) return parsed;
  return ok({ config: { ...parsed.value, kvOffloadingSize: flags.kvOffloadingSize, kvOffloadingBackend: flags.kvOffloadingSize === null ? null : flags.kvOffloadingBackend }, warnings });
}

type TierFields = Omit<KvOffloadConfig, "kvOffloadingSize" | "kvOffloadingBackend">;

/** SimpleCPUOffloadConnector's keys (vllm/v1/simple_kv_offload, disk_backend.py). */
function parseSimple(extra: Json, warnings: string[]): Result<TierFields> {
  for (const key of Object.keys(extra)) {
    if (!(SIMPLE_KEYS as readonly string[]).includes(key)) return err(`kv_connector_extra_config: SimpleCPUOffloadConnector has no key "${key}" (keys: ${SIMPLE_KEYS.join(", ")})`);
  }
  let cpuBytes = SIMPLE_DEFAULT_CPU_BYTES;
  if (extra["cpu_bytes_to_use"] !== undefined) {
    const v = positiveNumber("cpu_bytes_to_use", extra["cpu_bytes_to_use"]);
    if (!v.ok) return v;
    cpuBytes = v.value;
  }
  if (extra["cpu_bytes_to_use_per_rank"] !== undefined) {
    const v = positiveNumber("cpu_bytes_to_use_per_rank", extra["cpu_bytes_to_use_per_rank"]);
    if (!v.ok) return v;
    // one rank: the per-rank value is the whole pool
    if (v.value !== cpuBytes) warnings.push(`cpu_bytes_to_use_per_rank (${(v.value / 1e9).toFixed(2)} GB) != cpu_bytes_to_use/world_size (${(cpuBytes / 1e9).toFixed(2)} GB). Using per-rank value.`);
    cpuBytes = v.value;
  }
  let lazy = false;
  if (extra["lazy_offload"] !== undefined) {
    const v = bool("lazy_offload", extra["lazy_offload"]);
    if (!v.ok) return v;
    lazy = v.value;
  }
  const backend = extra["kv_offload_backend"] ?? "cpu";
  if (backend !== "cpu" && backend !== "disk") return err(`Unknown kv_offload_backend '${String(backend)}'; expected one of ('cpu', 'disk')`);
  const diskKeys = DISK_ONLY_KEYS.filter((k) => extra[k] !== undefined);
  if (backend === "cpu") {
    if (diskKeys.length > 0) {
      warnings.push(`kv_offload_backend is "cpu", ignoring disk-only config: ${diskKeys.join(", ")}. Set kv_offload_backend="disk" to enable the disk backend.`);
    }
    return ok({ connector: "SimpleCPUOffloadConnector", backend, cpuBytes, lazy, diskPath: null, diskCapacityBytes: 0, diskBufferSlots: 0, usePageCache: false, offloadPromptOnly: false });
  }
  const diskPath = extra["disk_path"];
  if (diskPath === undefined || diskPath === null || diskPath === "") return err('kv_offload_backend="disk" requires disk_path to be set.');
  if (typeof diskPath !== "string") return err(`disk_path must be a string (got ${JSON.stringify(diskPath)})`);
  let diskCapacityBytes = DEFAULT_DISK_CAPACITY_BYTES;
  if (extra["disk_capacity_bytes"] !== undefined) {
    const v = positiveNumber("disk_capacity_bytes", extra["disk_capacity_bytes"]);
    if (!v.ok) return v;
    diskCapacityBytes = v.value;
  }
  let diskBufferSlots = DEFAULT_DISK_BUFFER_SLOTS;
  if (extra["disk_buffer_slots"] !== undefined) {
    const v = extra["disk_buffer_slots"];
    if (typeof v !== "number" || !Number.isInteger(v)) return err(`disk_buffer_slots must be an integer (got ${JSON.stringify(v)})`);
    diskBufferSlots = Math.max(1, v);
  }
  let usePageCache = false;
  if (extra["use_page_cache"] !== undefined) {
    const v = bool("use_page_cache", extra["use_page_cache"]);
    if (!v.ok) return v;
    usePageCache = v.value;
  }
  return ok({ connector: "SimpleCPUOffloadConnector", backend, cpuBytes, lazy, diskPath, diskCapacityBytes, diskBufferSlots, usePageCache, offloadPromptOnly: false });
}

/** OffloadingConnector's keys with the CPU spec (vllm/v1/kv_offload/cpu/spec.py); the rest of its options are refused. */
function parseOffloading(extra: Json, blockSize: number): Result<TierFields> {
  for (const key of Object.keys(extra)) {
    if (!(OFFLOADING_KEYS as readonly string[]).includes(key)) {
      return err(`kv_connector_extra_config: fennec's OffloadingConnector does not support "${key}" (keys: ${OFFLOADING_KEYS.join(", ")})`);
    }
  }
  if (extra["cpu_bytes_to_use"] === undefined) return err("cpu_bytes_to_use must be specified in kv_connector_extra_config");
  const cpuBytes = positiveNumber("cpu_bytes_to_use", extra["cpu_bytes_to_use"]);
  if (!cpuBytes.ok) return cpuBytes;
  if (extra["block_size"] !== undefined && extra["blocks_per_chunk"] !== undefined) {
    return err("Specify only one of 'block_size' or 'blocks_per_chunk' in kv_connector_extra_config.");
  }
  const perChunk = extra["blocks_per_chunk"];
  if (perChunk !== undefined) {
    if (typeof perChunk !== "number" || !Number.isInteger(perChunk) || perChunk <= 0) return err("'blocks_per_chunk' must be greater than 0.");
    if (perChunk !== 1) return err(`blocks_per_chunk ${perChunk}: fennec offloads one KV block per chunk; use 1`);
  }
  const chunk = extra["block_size"];
  if (chunk !== undefined && chunk !== blockSize) return err(`kv_connector_extra_config block_size ${JSON.stringify(chunk)}: fennec offloads whole KV blocks, so it must equal --block-size ${blockSize}`);
  const spec = extra["spec_name"];
  if (spec !== undefined && spec !== "CPUOffloadingSpec") return err(`spec_name ${JSON.stringify(spec)}: fennec implements CPUOffloadingSpec only (use SimpleCPUOffloadConnector for a disk tier)`);
  const policy = extra["eviction_policy"];
  if (policy !== undefined && policy !== "lru") return err(`eviction_policy ${JSON.stringify(policy)}: fennec implements lru only`);
  const threshold = extra["store_threshold"];
  if (threshold !== undefined && (typeof threshold !== "number" || threshold >= 2 || threshold < 0)) {
    return err(`store_threshold ${JSON.stringify(threshold)}: fennec stores every block on first sight (0 or 1); a reuse threshold is not implemented`);
  }
  let offloadPromptOnly = true;
  if (extra["offload_prompt_only"] !== undefined) {
    const v = bool("offload_prompt_only", extra["offload_prompt_only"]);
    if (!v.ok) return v;
    offloadPromptOnly = v.value;
  }
  return ok({ connector: "OffloadingConnector", backend: "cpu", cpuBytes: cpuBytes.value, lazy: false, diskPath: null, diskCapacityBytes: 0, diskBufferSlots: 0, usePageCache: false, offloadPromptOnly });
}

/** vLLM's NIXL side-channel defaults (vllm/envs.py) and lease (nixl_connector.py kv_lease_duration) */
const DEFAULT_SIDE_CHANNEL_HOST = "localhost";
const DEFAULT_SIDE_CHANNEL_PORT = 5600;
const DEFAULT_LEASE_SECONDS = 30;
/** NixlConnector extra-config keys fennec honours; the rest of vLLM's are refused by name */
const PEER_KEYS = ["kv_lease_duration", "backends", "enforce_handshake_compat"] as const;
const PEER_REFUSED: Readonly<Record<string, string>> = {
  num_threads: "fennec's transport is one TCP connection per transfer on the event loop, not NIXL worker threads",
  bidirectional_kv_xfer: "the decode side does not hand its blocks back for a next turn",
  kv_recompute_threshold: "the decode side loads every remote block it is given",
  decoder_kv_blocks_ttl: "it belongs to bidirectional_kv_xfer, which fennec does not do",
  engine_ttl: "fennec keeps no per-remote-engine state between transfers",
  push_registration_timeout: "fennec's connector pulls (NIXL read mode), it never pushes",
  enable_cross_layers_blocks: "a fennec block already holds every layer",
};

/**
 * NixlConnector's keys (vllm/config/kv_transfer.py, nixl_connector.py). kv_ip / kv_port, unused by vLLM's NIXL
 * connector, name fennec's side channel when given; else VLLM_NIXL_SIDE_CHANNEL_HOST / _PORT as in vLLM.
 */
function parsePeer(transfer: Json, role: KvPeerConfig["role"], flags: KvTransferFlags, warnings: string[]): Result<KvPeerConfig> {
  for (const key of ["kv_rank", "kv_parallel_size", "kv_buffer_size", "kv_connector_module_path", "enable_permute_local_kv"]) {
    if (transfer[key] !== undefined && !(key === "kv_parallel_size" && transfer[key] === 1)) return err(`--kv-transfer-config: ${key} is not used by NixlConnector; remove it`);
  }
  const device = transfer["kv_buffer_device"];
  if (device !== undefined && device !== "cpu") return err(`--kv-transfer-config: kv_buffer_device must be cpu on fennec (got ${JSON.stringify(device)})`);
  const policy = transfer["kv_load_failure_policy"] ?? "fail";
  if (policy !== "fail" && policy !== "recompute") return err(`--kv-transfer-config: kv_load_failure_policy must be one of 'recompute', 'fail' (got ${JSON.stringify(policy)})`);
  const engineId = transfer["engine_id"] ?? crypto.randomUUID();
  if (typeof engineId !== "string" || engineId === "") return err(`--kv-transfer-config: engine_id must be a non-empty string (got ${JSON.stringify(engineId)})`);
  const host = transfer["kv_ip"] ?? flags.sideChannelHost ?? DEFAULT_SIDE_CHANNEL_HOST;
  if (typeof host !== "string" || host === "") return err(`--kv-transfer-config: kv_ip must be a host name or address (got ${JSON.stringify(host)})`);
  const portRaw = transfer["kv_port"] ?? (flags.sideChannelPort !== null && flags.sideChannelPort !== undefined ? Number(flags.sideChannelPort) : DEFAULT_SIDE_CHANNEL_PORT);
  if (typeof portRaw !== "number" || !Number.isInteger(portRaw) || portRaw < 0 || portRaw > 65535) {
    return err(`--kv-transfer-config: the side-channel port (kv_port or VLLM_NIXL_SIDE_CHANNEL_PORT) must be an integer 0-65535 (got ${JSON.stringify(transfer["kv_port"] ?? flags.sideChannelPort)})`);
  }
  const extra = transfer["kv_connector_extra_config"] ?? {};
  if (!isObject(extra)) return err("--kv-transfer-config: kv_connector_extra_config must be a JSON object");
  for (const key of Object.keys(extra)) {
    const why = PEER_REFUSED[key];
    if (why !== undefined) return err(`kv_connector_extra_config: NixlConnector's "${key}" is not supported by fennec: ${why}; remove it`);
    if (!(PEER_KEYS as readonly string[]).includes(key)) return err(`kv_connector_extra_config: NixlConnector has no key "${key}" on fennec (keys: ${PEER_KEYS.join(", ")})`);
  }
  const backends = extra["backends"];
  if (backends !== undefined && !(Array.isArray(backends) && backends.length > 0 && backends.every((b) => b === "UCX" || b === "TCP"))) {
    return err(`kv_connector_extra_config: backends ${JSON.stringify(backends)}: fennec's transport is TCP; give ["UCX"] (vLLM's default, mapped to it) or ["TCP"]`);
  }
  const compat = extra["enforce_handshake_compat"];
  if (compat !== undefined && compat !== true) return err("kv_connector_extra_config: enforce_handshake_compat must be true on fennec: blocks of another layout cannot be read");
  const lease = extra["kv_lease_duration"] ?? DEFAULT_LEASE_SECONDS;
  if (typeof lease !== "number" || !Number.isFinite(lease) || lease <= 0) return err(`kv_connector_extra_config: kv_lease_duration must be a positive number of seconds (got ${JSON.stringify(lease)})`);
  if (role === "kv_both") {
    warnings.push("Using kv_role='kv_both' with NixlConnector is deprecated and will be removed in a future release. Please set kv_role='kv_producer' for prefill instances and kv_role='kv_consumer' for decode instances.");
  }
  return ok({ connector: "NixlConnector", role, engineId, host, port: portRaw, leaseSeconds: lease, loadFailurePolicy: policy });
}
