/**
 * `--kv-events-config '<json>'`: vLLM's KVEventsConfig (vllm/config/kv_events.py), its keys, defaults and the
 * warnings vllm/config/vllm.py logs. Pure: the command line hands the raw JSON here and gets a record or one line.
 * Unknown keys are refused (vLLM's config dataclasses forbid extra fields), wrong types are refused with the key.
 */
import { err, ok, type Result } from "../util/result.ts";
import { parseEndpoint } from "./zmq-endpoint.ts";

export type KvEventsPublisherKind = "null" | "zmq";

export interface KvEventsConfig {
  readonly enableKvCacheEvents: boolean;
  /** default: "zmq" when events are enabled, else "null" (KVEventsConfig.__post_init__) */
  readonly publisher: KvEventsPublisherKind;
  /** PUB socket: bound when it holds `*` or `::` or is ipc://, else connected (ZmqEventPublisher._socket_setup) */
  readonly endpoint: string;
  /** ROUTER socket for replay requests, always bound; none when null */
  readonly replayEndpoint: string | null;
  /** how many past batches the replay ring keeps */
  readonly bufferSteps: number;
  /** PUB high-water mark: messages queued per subscriber before new ones are dropped for it (0: no limit) */
  readonly hwm: number;
  /** batches waiting for the publisher before publish() makes the caller wait */
  readonly maxQueueSize: number;
  /** the first frame of every message */
  readonly topic: string;
}

/** vLLM's defaults, in its declaration order. */
export const KV_EVENTS_DEFAULTS = {
  enable_kv_cache_events: false,
  publisher: null,
  endpoint: "tcp://*:5557",
  replay_endpoint: null,
  buffer_steps: 10_000,
  hwm: 100_000,
  max_queue_size: 100_000,
  topic: "",
} as const;

type Key = keyof typeof KV_EVENTS_DEFAULTS;
const KEYS = Object.keys(KV_EVENTS_DEFAULTS) as Key[];
const PUBLISHERS: readonly KvEventsPublisherKind[] = ["null", "zmq"];

export interface ParsedKvEventsConfig {
  readonly config: KvEventsConfig;
  /** vLLM's start-up warnings for this config (logged once) */
  readonly warnings: readonly string[];
}

function intField(key: Key, v: unknown, min: number): Result<number> {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) return err(`--kv-events-config: ${key} must be an integer (got ${JSON.stringify(v)})`);
  if (v < min) return err(`--kv-events-config: ${key} must be >= ${min} (got ${v})`);
  return ok(v);
}

/**
 * Parses the flag's JSON. `enablePrefixCaching` is the engine's setting, for vLLM's warning.
 * @example parseKvEventsConfig('{"enable_kv_cache_events": true, "endpoint": "tcp://*:5557"}', true)
 */
export function parseKvEventsConfig(json: string, enablePrefixCaching: boolean): Result<ParsedKvEventsConfig> {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (e) {
    return err(`--kv-events-config is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return err("--kv-events-config must be a JSON object");
  const given = raw as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!(KEYS as string[]).includes(key)) return err(`--kv-events-config: unknown field "${key}" (fields: ${KEYS.join(", ")})`);
  }
  const get = <K extends Key>(key: K): unknown => (given[key] === undefined ? KV_EVENTS_DEFAULTS[key] : given[key]);

  const enable = get("enable_kv_cache_events");
  if (typeof enable !== "boolean") return err(`--kv-events-config: enable_kv_cache_events must be true or false (got ${JSON.stringify(enable)})`);
  const publisherRaw = get("publisher");
  if (publisherRaw !== null && !(PUBLISHERS as unknown[]).includes(publisherRaw)) {
    return err(`--kv-events-config: publisher must be 'null' or 'zmq' (got ${JSON.stringify(publisherRaw)})`);
  }
  const publisher: KvEventsPublisherKind = (publisherRaw as KvEventsPublisherKind | null) ?? (enable ? "zmq" : "null");

  const endpoint = get("endpoint");
  if (typeof endpoint !== "string") return err(`--kv-events-config: endpoint must be a string (got ${JSON.stringify(endpoint)})`);
  const replay = get("replay_endpoint");
  if (replay !== null && typeof replay !== "string") return err(`--kv-events-config: replay_endpoint must be a string or null (got ${JSON.stringify(replay)})`);
  const topic = get("topic");
  if (typeof topic !== "string") return err(`--kv-events-config: topic must be a string (got ${JSON.stringify(topic)})`);
  const bufferSteps = intField("buffer_steps", get("buffer_steps"), 0);
  if (!bufferSteps.ok) return bufferSteps;
  const hwm = intField("hwm", get("hwm"), 0);
  if (!hwm.ok) return hwm;
  const maxQueueSize = intField("max_queue_size", get("max_queue_size"), 1);
  if (!maxQueueSize.ok) return maxQueueSize;

  // a publisher that will run must have endpoints it can open: say so at start-up, not at the first event
  if (enable && publisher === "zmq") {
    const pub = parseEndpoint(endpoint);
    if (!pub.ok) return err(`--kv-events-config: endpoint: ${pub.error}`);
    if (replay !== null) {
      const rep = parseEndpoint(replay);
      if (!rep.ok) return err(`--kv-events-config: replay_endpoint: ${rep.error}`);
    }
  }

  const warnings: string[] = [];
  if (enable && !enablePrefixCaching) warnings.push("KV cache events are on, but prefix caching is not enabled. Use --enable-prefix-caching to enable.");
  if (publisher !== "null" && !enable) {
    warnings.push("KV cache events are disabled, but the scheduler is configured to publish them. Modify KVEventsConfig.enable_kv_cache_events to True to enable.");
  }
  return ok({
    config: {
      enableKvCacheEvents: enable,
      publisher,
      endpoint,
      replayEndpoint: replay as string | null,
      bufferSteps: bufferSteps.value,
      hwm: hwm.value,
      maxQueueSize: maxQueueSize.value,
      topic,
    },
    warnings,
  });
}
