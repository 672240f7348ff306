/**
 * fennec's KV-event publisher against an independent consumer: libzmq through Debian's python3-zmq and Debian's
 * python3-msgpack (subscriber.py), which decodes and checks every field of every event. Covers the live PUB stream
 * (bind and connect, tcp and ipc), the ROUTER replay protocol (DEALER and REQ clients), and gap-free sequence numbers
 * under eight concurrent producers.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { BlockHasher, externalBlockHash, noneHash } from "../../src/kv-events/block-hash.ts";
import { type KvEventsConfig, parseKvEventsConfig } from "../../src/kv-events/kv-events-config.ts";
import { ZmqEventPublisher } from "../../src/kv-events/kv-event-publisher.ts";
import { type KvCacheEvent, MEDIUM } from "../../src/kv-events/kv-events.ts";

const PYTHON = "/usr/bin/python3";
const SCRIPT = join(import.meta.dir, "subscriber.py");
const hasDeps = spawnSync(PYTHON, ["-c", "import zmq, msgpack"]).status === 0;
if (!hasDeps) console.warn("python-subscriber.test.ts skipped: needs Debian's python3-zmq and python3-msgpack (scripts/install-test-deps.sh)");

type Json = Record<string, unknown>;
interface Received {
  topic: string;
  seq: number;
  ts: number;
  rank: number;
  events: Json[];
}

const open: ZmqEventPublisher[] = [];
const procs: ReturnType<typeof Bun.spawn>[] = [];
afterEach(async () => {
  for (const p of procs.splice(0)) p.kill();
  for (const p of open.splice(0)) await p.shutdown();
});

function publisher(over: Json = {}): ZmqEventPublisher {
  const parsed = parseKvEventsConfig(JSON.stringify({ enable_kv_cache_events: true, endpoint: "tcp://*:0", replay_endpoint: "tcp://*:0", ...over }), true);
  if (!parsed.ok) throw new Error(parsed.error);
  const p = ZmqEventPublisher.open(parsed.value.config as KvEventsConfig, 0, (line) => console.warn(line));
  if (!p.ok) throw new Error(p.error);
  open.push(p.value);
  return p.value;
}

const local = (endpoint: string): string => endpoint.replace("tcp://0.0.0.0:", "tcp://127.0.0.1:");

/** Runs subscriber.py; `first()` resolves with its first JSON line, `lines()` with all of them once it exits 0. */
function python(...args: string[]) {
  const proc = Bun.spawn([PYTHON, SCRIPT, ...args], { stdout: "pipe", stderr: "pipe" });
  procs.push(proc);
  const lines: Json[] = [];
  let firstSeen: (line: Json) => void = () => {};
  const firstLine = new Promise<Json>((resolve) => (firstSeen = resolve));
  const out = (async () => {
    const decoder = new TextDecoder();
    let buffered = "";
    const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      buffered += decoder.decode(r.value, { stream: true });
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = JSON.parse(buffered.slice(0, nl)) as Json;
        buffered = buffered.slice(nl + 1);
        if (lines.push(line) === 1) firstSeen(line);
      }
    }
    const [err, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`subscriber.py ${args.join(" ")} exited ${code}: ${JSON.stringify(lines.at(-1))} ${err}`);
    return lines;
  })();
  // a failure surfaces where the test awaits lines(), not as an unhandled rejection between tests
  out.catch(() => {});
  return { proc, first: () => firstLine, lines: () => out };
}

async function until(cond: () => boolean, what: string, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(5);
  }
}

/** Starts a SUB (connect) and waits until the publisher has its subscription. */
async function subscriber(pub: ZmqEventPublisher, topic: string, count: number) {
  const sub = python("sub", local(pub.endpoint), topic, String(count));
  await until(() => pub.numSubscribers > 0, "the subscription");
  return async () => (await sub.lines()).slice(1) as unknown as Received[];
}

const hasher = new BlockHasher("sha256_cbor", noneHash("sha256_cbor", "0"));
const prompt = Array.from({ length: 48 }, (_, i) => 1000 + i * 37);
const digests = hasher.hashFullBlocks(prompt, 16, []);
const ints = digests.map((d) => externalBlockHash(d, true) as bigint);
/** subscriber.py prints ints beyond 2^53 as strings */
const asPrinted = (h: bigint): number | string => (h > 2n ** 53n ? h.toString() : Number(h));

describe.skipIf(!hasDeps)("an independent libzmq subscriber", () => {
  test("receives every event kind and decodes every field", async () => {
    const pub = publisher({ topic: "kv@pod-1" });
    const received = await subscriber(pub, "kv@", 2);
    const stored: KvCacheEvent = {
      type: "BlockStored", blockHashes: ints, parentBlockHash: null, tokenIds: prompt, blockSize: 16, loraId: null,
      medium: MEDIUM.primary, loraName: null, extraKeys: [null, null, null], groupIdx: 0, kvCacheSpecKind: "full_attention",
    };
    const offloaded: KvCacheEvent = {
      type: "BlockStored", blockHashes: [ints[2]!], parentBlockHash: ints[1]!, tokenIds: prompt.slice(32), blockSize: 16, loraId: 4,
      medium: MEDIUM.cpu, loraName: "sql-lora", extraKeys: [["sql-lora"]], groupIdx: 0, kvCacheSpecKind: "full_attention",
      kvCacheSpecSlidingWindow: 1024, locality: "LOCAL",
    };
    pub.publish({ ts: 1789095808.83, events: [stored, offloaded] });
    pub.publish({
      ts: 1789095809.5,
      events: [
        { type: "BlockRemoved", blockHashes: [ints[0]!], medium: MEDIUM.primary, groupIdx: 0 },
        { type: "BlockRemoved", blockHashes: [digests[1]!], medium: MEDIUM.storage, locality: "REMOTE" },
        { type: "AllBlocksCleared" },
      ],
    });
    const [a, b] = await received();
    expect(a).toEqual({
      topic: "kv@pod-1", seq: 0, ts: 1789095808.83, rank: 0,
      events: [
        {
          type: "BlockStored", block_hashes: ints.map(asPrinted), parent_block_hash: null, token_ids: prompt, block_size: 16,
          lora_id: null, medium: "GPU", lora_name: null, extra_keys: [null, null, null], group_idx: 0, kv_cache_spec_kind: "full_attention",
        },
        {
          type: "BlockStored", block_hashes: [asPrinted(ints[2]!)], parent_block_hash: asPrinted(ints[1]!), token_ids: prompt.slice(32),
          block_size: 16, lora_id: 4, medium: "CPU", lora_name: "sql-lora", extra_keys: [["sql-lora"]], group_idx: 0,
          kv_cache_spec_kind: "full_attention", kv_cache_spec_sliding_window: 1024, locality: "LOCAL",
        },
      ],
    });
    expect(b).toEqual({
      topic: "kv@pod-1", seq: 1, ts: 1789095809.5, rank: 0,
      events: [
        { type: "BlockRemoved", block_hashes: [asPrinted(ints[0]!)], medium: "GPU", group_idx: 0 },
        { type: "BlockRemoved", block_hashes: [{ hex: Buffer.from(digests[1]!).toString("hex") }], medium: "STORAGE", locality: "REMOTE" },
        { type: "AllBlocksCleared" },
      ],
    });
  });

  test("an evicted prefix that is stored again reads as BlockRemoved, then BlockStored, in sequence order", async () => {
    const pub = publisher();
    const received = await subscriber(pub, "", 3);
    const store: KvCacheEvent = {
      type: "BlockStored", blockHashes: [ints[0]!], parentBlockHash: null, tokenIds: prompt.slice(0, 16), blockSize: 16, loraId: null,
      medium: MEDIUM.primary, loraName: null, extraKeys: [null], groupIdx: 0,
    };
    pub.publish({ ts: 1, events: [store] });
    pub.publish({ ts: 2, events: [{ type: "BlockRemoved", blockHashes: [ints[0]!], medium: MEDIUM.primary, groupIdx: 0 }] });
    pub.publish({ ts: 3, events: [store] });
    const got = await received();
    expect(got.map((m) => [m.seq, m.events[0]!["type"], m.events[0]!["block_hashes"]])).toEqual([
      [0, "BlockStored", [asPrinted(ints[0]!)]],
      [1, "BlockRemoved", [asPrinted(ints[0]!)]],
      [2, "BlockStored", [asPrinted(ints[0]!)]],
    ]);
  });

  test("sequence numbers have no gaps and each stream keeps its order under 8 concurrent producers", async () => {
    // a small queue makes publish() drain inline as well as on the next turn of the event loop
    const pub = publisher({ max_queue_size: 3 });
    const streams = 8;
    const perStream = 40;
    const received = await subscriber(pub, "", streams * perStream);
    const producer = async (stream: number) => {
      for (let i = 0; i < perStream; i++) {
        pub.publish({
          ts: Date.now() / 1000,
          events: [{ type: "BlockRemoved", blockHashes: [BigInt(stream * 1000 + i)], medium: MEDIUM.primary, groupIdx: stream }],
        });
        if ((i + stream) % 3 === 0) await Bun.sleep(Math.floor(Math.random() * 3));
      }
    };
    await Promise.all(Array.from({ length: streams }, (_, s) => producer(s)));
    const got = await received();
    expect(got.map((m) => m.seq)).toEqual(Array.from({ length: streams * perStream }, (_, i) => i));
    for (let s = 0; s < streams; s++) {
      const mine = got.filter((m) => m.events[0]!["group_idx"] === s).map((m) => (m.events[0]!["block_hashes"] as number[])[0]);
      expect(mine).toEqual(Array.from({ length: perStream }, (_, i) => s * 1000 + i));
    }
    expect(pub.sequence).toBe(streams * perStream);
  });

  test("the publisher connects when the endpoint names a host (the subscriber binds)", async () => {
    const sub = python("sub-bind", "tcp://127.0.0.1:*", "", "1");
    const endpoint = (await sub.first())["endpoint"] as string;
    const pub = publisher({ endpoint, replay_endpoint: null });
    expect(pub.endpoint).toBe(endpoint);
    await until(() => pub.numSubscribers > 0, "the connection and subscription");
    pub.publish({ ts: 5.5, events: [{ type: "AllBlocksCleared" }] });
    const lines = await sub.lines();
    expect((lines[1] as unknown as Received).events).toEqual([{ type: "AllBlocksCleared" }]);
  });

  test("ipc:// endpoints bind a unix socket", async () => {
    const path = `/tmp/fennec-kv-events-${process.pid}.sock`;
    const pub = publisher({ endpoint: `ipc://${path}`, replay_endpoint: null });
    const sub = python("sub", `ipc://${path}`, "", "1");
    await until(() => pub.numSubscribers > 0, "the subscription");
    pub.publish({ ts: 6.5, events: [{ type: "AllBlocksCleared" }] });
    const lines = await sub.lines();
    expect((lines[1] as unknown as Received).events).toEqual([{ type: "AllBlocksCleared" }]);
  });
});

describe.skipIf(!hasDeps)("replay over the ROUTER socket", () => {
  async function filled(n: number, bufferSteps: number) {
    const pub = publisher({ buffer_steps: bufferSteps, topic: "kv" });
    for (let i = 0; i < n; i++) pub.publish({ ts: i + 0.5, events: [{ type: "BlockRemoved", blockHashes: [BigInt(i)], medium: MEDIUM.primary }] });
    await until(() => pub.sequence === n, "the queue to drain");
    return local(pub.replayEndpoint!);
  }

  test("a DEALER asking from seq k gets every buffered batch from k on, then the end marker", async () => {
    const replay = await filled(20, 10);
    const lines = await python("replay", replay, "12", "dealer").lines();
    expect(lines.at(-1)).toEqual({ end: true });
    const batches = lines.slice(0, -1) as unknown as Received[];
    expect(batches.map((b) => b.seq)).toEqual([12, 13, 14, 15, 16, 17, 18, 19]);
    expect(batches.map((b) => b.topic)).toEqual(Array(8).fill("kv"));
    expect(batches.map((b) => (b.events[0]!["block_hashes"] as number[])[0])).toEqual([12, 13, 14, 15, 16, 17, 18, 19]);
  });

  test("only the last buffer_steps batches are kept", async () => {
    const replay = await filled(20, 10);
    const lines = await python("replay", replay, "0", "dealer").lines();
    expect((lines.slice(0, -1) as unknown as Received[]).map((b) => b.seq)).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
  });

  test("a start past the newest batch gets the end marker alone", async () => {
    const replay = await filled(3, 10);
    expect(await python("replay", replay, "99", "dealer").lines()).toEqual([{ end: true }]);
  });

  test("a REQ client gets the first batch of the range (libzmq REQ takes one reply)", async () => {
    const replay = await filled(5, 10);
    const lines = await python("replay", replay, "3", "req").lines();
    expect((lines as unknown as Received[]).map((b) => b.seq)).toEqual([3]);
  });
});
