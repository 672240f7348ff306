// --kv-events-config and --prefix-caching-hash-algo on the serve command line: parsed into the engine arguments
// (with PYTHONHASHSEED and VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES), vLLM's start-up warnings, one-line refusals.
import { describe, expect, test } from "bun:test";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { serveConfig } from "../../src/command-line/serve-config.ts";

function serve(argv: string[], env: Record<string, string> = {}) {
  const parsed = parseCommandArgs("serve", argv);
  if (!parsed.ok) return parsed;
  return serveConfig(parsed.value, env);
}

const events = (json: unknown) => ["--kv-events-config", typeof json === "string" ? json : JSON.stringify(json)];

describe("serve: KV events flags", () => {
  test("defaults: no events, sha256, unseeded, int hashes", () => {
    const c = serve([]);
    if (!c.ok) throw new Error(c.error);
    expect(c.value.engine).toMatchObject({ kvEventsConfig: null, prefixCachingHashAlgo: "sha256", pythonHashSeed: null, kvEventsUseIntBlockHashes: true });
  });

  test("the config, the algorithm and the environment reach the engine arguments", () => {
    const c = serve([...events({ enable_kv_cache_events: true, endpoint: "tcp://*:5557", topic: "kv@p@m" }), "--prefix-caching-hash-algo", "sha256_cbor"],
      { PYTHONHASHSEED: "42", VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: "0" });
    if (!c.ok) throw new Error(c.error);
    expect(c.value.engine.kvEventsConfig).toMatchObject({ enableKvCacheEvents: true, publisher: "zmq", endpoint: "tcp://*:5557", topic: "kv@p@m", bufferSteps: 10_000 });
    expect(c.value.engine).toMatchObject({ prefixCachingHashAlgo: "sha256_cbor", pythonHashSeed: "42", kvEventsUseIntBlockHashes: false });
    expect(c.value.warnings).toEqual([]);
  });

  test("vLLM's warnings: events without prefix caching, a publisher without events, sha256_cbor without a seed", () => {
    const noCache = serve([...events({ enable_kv_cache_events: true }), "--no-enable-prefix-caching"]);
    if (!noCache.ok) throw new Error(noCache.error);
    expect(noCache.value.warnings).toContain("KV cache events are on, but prefix caching is not enabled. Use --enable-prefix-caching to enable.");
    const off = serve(events({ publisher: "zmq" }));
    if (!off.ok) throw new Error(off.error);
    expect(off.value.warnings.some((w) => w.startsWith("KV cache events are disabled, but the scheduler is configured to publish them."))).toBe(true);
    const unseeded = serve(["--prefix-caching-hash-algo", "sha256_cbor"]);
    if (!unseeded.ok) throw new Error(unseeded.error);
    expect(unseeded.value.warnings.some((w) => w.startsWith("PYTHONHASHSEED is not set."))).toBe(true);
  });

  test("bad values are one line naming the flag", () => {
    const bad = [
      serve(events("{not json")),
      serve(events({ enable_kv_cache_events: true, bogus: 1 })),
      serve(events({ enable_kv_cache_events: true, endpoint: "udp://x" })),
      serve(["--prefix-caching-hash-algo", "xxhash"]),
      serve(["--prefix-caching-hash-algo", "md5"]),
    ];
    const env = serve([], { VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: "yes" });
    expect(env.ok ? "" : env.error).toBe('VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES must be an integer (0 or 1), got "yes"');
    for (const r of bad) {
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error).toMatch(/--kv-events-config|--prefix-caching-hash-algo/);
        expect(r.error).not.toContain("\n");
      }
    }
  });
});
