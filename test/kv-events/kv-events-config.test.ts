/** `--kv-events-config` with vLLM's keys, defaults, errors and warnings; endpoint rules from vLLM's kv_events.py. */
import { describe, expect, test } from "bun:test";
import { parseKvEventsConfig } from "../../src/kv-events/kv-events-config.ts";
import { offsetEndpointPort, parseEndpoint, shouldBind } from "../../src/kv-events/zmq-endpoint.ts";

const parse = (json: string, prefixCaching = true) => parseKvEventsConfig(json, prefixCaching);

describe("--kv-events-config", () => {
  test("vLLM's defaults; publisher zmq when enabled", () => {
    const r = parse('{"enable_kv_cache_events": true}');
    expect(r).toEqual({
      ok: true,
      value: {
        config: {
          enableKvCacheEvents: true, publisher: "zmq", endpoint: "tcp://*:5557", replayEndpoint: null, bufferSteps: 10000,
          hwm: 100000, maxQueueSize: 100000, topic: "",
        },
        warnings: [],
      },
    });
  });

  test("publisher null when not enabled; every key taken as given", () => {
    const off = parse("{}");
    expect(off.ok && off.value.config.publisher).toBe("null");
    const r = parse(JSON.stringify({
      enable_kv_cache_events: true, publisher: "zmq", endpoint: "tcp://router:6000", replay_endpoint: "tcp://*:6001",
      buffer_steps: 5, hwm: 0, max_queue_size: 7, topic: "kv@pod-1",
    }));
    expect(r.ok && r.value.config).toEqual({
      enableKvCacheEvents: true, publisher: "zmq", endpoint: "tcp://router:6000", replayEndpoint: "tcp://*:6001", bufferSteps: 5,
      hwm: 0, maxQueueSize: 7, topic: "kv@pod-1",
    });
  });

  test("vLLM's warnings: events without prefix caching; a publisher while disabled", () => {
    const a = parse('{"enable_kv_cache_events": true}', false);
    expect(a.ok && a.value.warnings).toEqual(["KV cache events are on, but prefix caching is not enabled. Use --enable-prefix-caching to enable."]);
    const b = parse('{"publisher": "zmq"}');
    expect(b.ok && b.value.warnings[0]).toContain("KV cache events are disabled, but the scheduler is configured to publish them");
  });

  test.each([
    ["not json", "{", "--kv-events-config is not valid JSON"],
    ["not an object", "[1]", "--kv-events-config must be a JSON object"],
    ["unknown key", '{"enable": true}', '--kv-events-config: unknown field "enable" (fields: enable_kv_cache_events, publisher, endpoint'],
    ["bad publisher", '{"publisher": "kafka"}', "--kv-events-config: publisher must be 'null' or 'zmq' (got \"kafka\")"],
    ["string bool", '{"enable_kv_cache_events": "yes"}', "--kv-events-config: enable_kv_cache_events must be true or false (got \"yes\")"],
    ["float hwm", '{"hwm": 1.5}', "--kv-events-config: hwm must be an integer (got 1.5)"],
    ["negative buffer", '{"buffer_steps": -1}', "--kv-events-config: buffer_steps must be >= 0 (got -1)"],
    ["zero queue", '{"max_queue_size": 0}', "--kv-events-config: max_queue_size must be >= 1 (got 0)"],
    ["topic type", '{"topic": 3}', "--kv-events-config: topic must be a string (got 3)"],
    ["inproc", '{"enable_kv_cache_events": true, "endpoint": "inproc://cache"}', "--kv-events-config: endpoint: \"inproc://cache\": inproc:// reaches only sockets inside one process"],
    ["bad replay", '{"enable_kv_cache_events": true, "replay_endpoint": "udp://x:1"}', "--kv-events-config: replay_endpoint: \"udp://x:1\": fennec's ZeroMQ sockets speak tcp:// and ipc://"],
  ])("%s is refused with one line", (_name, json, message) => {
    const r = parse(json);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toStartWith(message);
  });
});

describe("endpoints", () => {
  test.each([
    ["tcp://*:5557", true],
    ["tcp://[::]:5557", true],
    ["ipc:///tmp/kv.sock", true],
    ["inproc://cache", true],
    ["tcp://router.local:5557", false],
    ["tcp://0.0.0.0:5557", false],
  ])("vLLM binds %s: %p", (endpoint, bind) => {
    expect(shouldBind(endpoint)).toBe(bind);
  });

  test.each([
    ["tcp://*:5557", 0, "tcp://*:5557"],
    ["tcp://*:5557", 2, "tcp://*:5559"],
    ["tcp://host:5557", 1, "tcp://host:5558"],
    ["inproc://cache", 3, "inproc://cache_dp3"],
  ])("offset_endpoint_port(%s, %d) = %s", (endpoint, rank, expected) => {
    expect(offsetEndpointPort(endpoint, rank)).toEqual({ ok: true, value: expected });
  });

  test("an ipc endpoint cannot be offset by a rank (vLLM's ValueError); none stays none", () => {
    expect(offsetEndpointPort("ipc:///tmp/x", 1)).toEqual({ ok: false, error: "Invalid endpoint: must contain 'inproc' or 'tcp'" });
    expect(offsetEndpointPort(null, 1)).toEqual({ ok: true, value: null });
  });

  test.each([
    ["tcp://*:5557", { transport: "tcp", host: "0.0.0.0", port: 5557 }],
    ["tcp://*:*", { transport: "tcp", host: "0.0.0.0", port: 0 }],
    ["tcp://[::1]:80", { transport: "tcp", host: "::1", port: 80 }],
    ["tcp://10.0.0.2:5557", { transport: "tcp", host: "10.0.0.2", port: 5557 }],
    ["ipc:///tmp/kv.sock", { transport: "ipc", path: "/tmp/kv.sock" }],
  ])("parses %s", (endpoint, expected) => {
    expect(parseEndpoint(endpoint)).toEqual({ ok: true, value: expected as never });
  });

  test.each([["tcp://host"], ["tcp://host:99999"], ["tcp://host:x"], ["ipc://"], ["http://x:1"]])("refuses %s", (endpoint) => {
    expect(parseEndpoint(endpoint).ok).toBe(false);
  });
});
