/** The publisher's own rules, without a Python peer: queue bound, factory, socket errors, malformed replay requests. */
import { afterEach, describe, expect, test } from "bun:test";
import { createEventPublisher, NullEventPublisher, ZmqEventPublisher } from "../../src/kv-events/kv-event-publisher.ts";
import { type KvEventsConfig, parseKvEventsConfig } from "../../src/kv-events/kv-events-config.ts";
import { encodeCommand, encodeFrames, encodeGreeting, encodeProperties } from "../../src/kv-events/zmtp.ts";

const opened: ZmqEventPublisher[] = [];
afterEach(async () => {
  for (const p of opened.splice(0)) await p.shutdown();
});

function config(over: Record<string, unknown> = {}): KvEventsConfig {
  const r = parseKvEventsConfig(JSON.stringify({ enable_kv_cache_events: true, endpoint: "tcp://*:0", ...over }), true);
  if (!r.ok) throw new Error(r.error);
  return r.value.config;
}

function open(over: Record<string, unknown> = {}, warn?: (line: string) => void): ZmqEventPublisher {
  const p = ZmqEventPublisher.open(config(over), 0, warn);
  if (!p.ok) throw new Error(p.error);
  opened.push(p.value);
  return p.value;
}

const batch = { ts: 1.5, events: [{ type: "AllBlocksCleared" as const }] };

describe("ZmqEventPublisher", () => {
  test("publish() returns at once; a full queue sends its oldest batch inline (vLLM's put blocks the caller)", async () => {
    const p = open({ max_queue_size: 2 });
    for (let i = 0; i < 5; i++) p.publish(batch);
    // two batches wait for the next turn of the loop; three went out inline to make room
    expect(p.sequence).toBe(3);
    await Bun.sleep(0);
    expect(p.sequence).toBe(5);
  });

  test("sequence numbers count batches even with no subscriber", async () => {
    const p = open();
    p.publish(batch);
    p.publish(batch);
    await Bun.sleep(0);
    expect(p.sequence).toBe(2);
    expect(p.numSubscribers).toBe(0);
  });

  test("a closed publisher refuses batches, as vLLM's raises", async () => {
    const p = open();
    await p.shutdown();
    expect(() => p.publish(batch)).toThrow("Publisher is closed");
  });

  test("the bound endpoint reports the real port; a port in use is an error", () => {
    const p = open();
    const port = Number(p.endpoint.split(":").at(-1));
    expect(port).toBeGreaterThan(0);
    const clash = ZmqEventPublisher.open(config({ endpoint: `tcp://*:${port}` }), 0);
    expect(clash.ok).toBe(false);
    if (!clash.ok) expect(clash.error).toContain("cannot bind");
  });

  test("a data-parallel rank offsets the ports; ipc cannot be offset", () => {
    const r = ZmqEventPublisher.open(config({ endpoint: "ipc:///tmp/fennec-kv-rank.sock" }), 1);
    expect(r).toEqual({ ok: false, error: "Invalid endpoint: must contain 'inproc' or 'tcp'" });
  });

  test("a replay request that is not [identity, empty, start] is logged and ignored", async () => {
    const warnings: string[] = [];
    const p = open({ replay_endpoint: "tcp://*:0" }, (w) => warnings.push(w));
    const port = Number(p.replayEndpoint!.split(":").at(-1));
    const received: number[] = [];
    const sock = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data: (_s, d) => { received.push(...d); } } });
    sock.write(encodeGreeting());
    sock.write(encodeCommand("READY", encodeProperties({ "Socket-Type": "DEALER" })));
    sock.write(encodeFrames([new Uint8Array(0), new Uint8Array(8), new Uint8Array(1)]));
    const end = Date.now() + 5000;
    while (warnings.length === 0 && Date.now() < end) await Bun.sleep(5);
    expect(warnings).toEqual(['Invalid replay request: 4 frames (expected [identity, "", start seq])']);
    sock.end();
  });
});

describe("createEventPublisher", () => {
  test("disabled events or publisher null give the null publisher", async () => {
    expect(createEventPublisher(null)).toEqual({ ok: true, value: expect.any(NullEventPublisher) });
    const off = parseKvEventsConfig('{"enable_kv_cache_events": false, "publisher": "zmq"}', true);
    expect(off.ok && createEventPublisher(off.value.config).ok && createEventPublisher(off.value.config)).toEqual({ ok: true, value: expect.any(NullEventPublisher) });
    const nul = parseKvEventsConfig('{"enable_kv_cache_events": true, "publisher": "null"}', true);
    expect(nul.ok && createEventPublisher(nul.value.config)).toEqual({ ok: true, value: expect.any(NullEventPublisher) });
  });

  test("enabled zmq gives a ZMQ publisher", async () => {
    const r = createEventPublisher(config());
    expect(r.ok && r.value instanceof ZmqEventPublisher).toBe(true);
    if (r.ok) await r.value.shutdown();
  });
});
