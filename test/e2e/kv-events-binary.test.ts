/**
 * KV cache events from the real server (`fennec serve --kv-events-config`), read by an independent consumer: libzmq
 * through Debian's python3-zmq and python3-msgpack (test/kv-events/subscriber.py checks every field of every event).
 * Requests go over HTTP with prompts given as token ids, so the test knows each block's tokens and recomputes vLLM's
 * block hashes (PYTHONHASHSEED=0) to compare. A small KV pool (--kv-cache-memory) forces evictions; a second server
 * with --kv-offloading-size shows the CPU tier's BlockStored / BlockRemoved.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { BlockHasher, externalBlockHash, noneHash } from "../../src/kv-events/block-hash.ts";
import { freePort, startServer, type ServerProcess } from "./server-process.ts";

const PYTHON = "/usr/bin/python3";
const SCRIPT = join(import.meta.dir, "..", "kv-events", "subscriber.py");
const hasDeps = spawnSync(PYTHON, ["-c", "import zmq, msgpack"]).status === 0;
if (!hasDeps) console.warn("kv-events-binary.test.ts skipped: needs Debian's python3-zmq and python3-msgpack (scripts/install-test-deps.sh)");

const BLOCK = 16;
/** the subscriber stops after this long without a message (the requests run back to back, far more often) */
const IDLE_S = 6;
const TOPIC = "kv@pod-0@stories";
const hasher = new BlockHasher("sha256", noneHash("sha256", "0"));

type Json = Record<string, unknown>;
interface Message {
  topic: string;
  seq: number;
  ts: number;
  rank: number;
  events: Json[];
}

/** subscriber.py prints ints beyond 2^53 as strings: compare hashes as decimal strings */
const hashText = (h: unknown): string => String(h);
/** vLLM's event hashes of the full blocks of `tokens` (no extra keys, chained from NONE_HASH) */
const expectedHashes = (tokens: readonly number[]): string[] =>
  hasher.hashFullBlocks(tokens, BLOCK, []).map((d) => (externalBlockHash(d, true) as bigint).toString());

/** `count` token ids of the stories260K vocabulary (512 ids; 0-2 are special), distinct per `seed` */
const tokens = (seed: number, count: number): number[] => Array.from({ length: count }, (_, i) => 3 + ((seed * 131 + i * 17) % 500));

interface Collector {
  messages(): Promise<Message[]>;
}

/** subscriber.py collect: every message until none comes for `idleS` seconds. */
async function collect(endpoint: string, idleS: number): Promise<Collector> {
  const proc = Bun.spawn([PYTHON, SCRIPT, "collect", endpoint, "kv@", String(idleS)], { stdout: "pipe", stderr: "pipe" });
  const out = (async () => {
    const [text, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`subscriber.py collect exited ${code}: ${text.slice(-500)} ${err}`);
    return text.trim().split("\n").map((l) => JSON.parse(l) as Json);
  })();
  out.catch(() => {});
  // ZeroMQ's slow joiner: give the SUB's subscription time to reach the PUB before anything is published
  await Bun.sleep(700);
  return { messages: async () => (await out).filter((l) => l["ready"] !== true) as unknown as Message[] };
}

function replay(endpoint: string, start: number): Json[] {
  const r = spawnSync(PYTHON, [SCRIPT, "replay", endpoint, String(start), "dealer"], { encoding: "utf8", timeout: 30_000 });
  if (r.status !== 0) throw new Error(`replay exited ${r.status}: ${r.stdout} ${r.stderr}`);
  return r.stdout.trim().split("\n").map((l) => JSON.parse(l) as Json);
}

const STORY = "Once upon a time there was a little girl named Lily who loved to play outside in the park with her friends every day";

async function complete(server: ServerProcess, prompt: readonly number[] | string, maxTokens: number, stream = false): Promise<void> {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`completion ${res.status}: ${text}`);
}

const storedEvents = (messages: readonly Message[], medium: string) =>
  messages.flatMap((m) => m.events.filter((e) => e["type"] === "BlockStored" && e["medium"] === medium).map((e) => ({ seq: m.seq, e })));
const removedEvents = (messages: readonly Message[], medium: string) =>
  messages.flatMap((m) => m.events.filter((e) => e["type"] === "BlockRemoved" && e["medium"] === medium).map((e) => ({ seq: m.seq, e })));

function eventsConfig(pubPort: number, replayPort: number | null): string {
  return JSON.stringify({
    enable_kv_cache_events: true, endpoint: `tcp://*:${pubPort}`, topic: TOPIC,
    ...(replayPort !== null ? { replay_endpoint: `tcp://*:${replayPort}` } : {}),
  });
}

describe.skipIf(!hasDeps)("fennec serve --kv-events-config", () => {
  let server: ServerProcess;
  let pubPort: number;
  let replayPort: number;
  let numBlocks: number;
  let messages: Message[] = [];
  let rendered: number[] = [];

  beforeAll(async () => {
    pubPort = freePort();
    replayPort = freePort();
    // about 12 blocks of 16 tokens for the default model (stories260K): a long prompt evicts every cached block
    server = await startServer(["--kv-cache-memory", "125000", "--max-model-len", "256", "--kv-events-config", eventsConfig(pubPort, replayPort)], { env: { PYTHONHASHSEED: "0" } });
    numBlocks = Number(/(\d+) KV blocks of 16 tokens/.exec(server.log())?.[1]);
    const sub = await collect(`tcp://127.0.0.1:${pubPort}`, IDLE_S);

    // 1. a prompt of three full blocks, computed then cached
    await complete(server, tokens(1, 3 * BLOCK + 5), 4);
    // 2. the same prompt again: a prefix-cache hit
    await complete(server, tokens(1, 3 * BLOCK + 5), 4);
    // 3. a prompt that needs every block of the pool: the first prompt's blocks are evicted
    await complete(server, tokens(2, (numBlocks - 1) * BLOCK), BLOCK - 2);
    // 4. the first prompt once more: computed and stored again
    await complete(server, tokens(1, 3 * BLOCK + 5), 4);
    // 5. eight streams at once (more than the pool holds: preemptions too)
    await Promise.all(Array.from({ length: 8 }, (_, i) => complete(server, tokens(10 + i, 2 * BLOCK + 3), 24, true)));
    // 6. a text prompt rendered (as a KV-aware router tokenizes it), then run
    const renderRes = await fetch(`${server.url}/v1/completions/render`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: STORY, max_tokens: 2 }),
    });
    rendered = ((await renderRes.json()) as { token_ids: number[] }[])[0]!.token_ids;
    await complete(server, STORY, 2);
    messages = await sub.messages();
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
  });

  test("the pool is small enough to evict", () => {
    expect(numBlocks).toBeGreaterThanOrEqual(8);
    expect(numBlocks).toBeLessThanOrEqual(16);
  });

  test("every message is one batch on the configured topic, rank 0, wall-clock ts, sequence from 0 without gaps", () => {
    expect(messages.length).toBeGreaterThan(8);
    expect(messages.map((m) => m.seq)).toEqual(messages.map((_, i) => i));
    const now = Date.now() / 1000;
    for (const m of messages) {
      expect(m.topic).toBe(TOPIC);
      expect(m.rank).toBe(0);
      expect(m.ts).toBeGreaterThan(now - 600);
      expect(m.ts).toBeLessThanOrEqual(now + 1);
      expect(m.events.length).toBeGreaterThan(0);
    }
  });

  test("the first prompt's blocks are stored with vLLM's hashes, tokens and fields", () => {
    const prompt = tokens(1, 3 * BLOCK + 5);
    const first = storedEvents(messages, "GPU")[0]!.e;
    expect(first).toEqual({
      type: "BlockStored", block_hashes: expect.any(Array), parent_block_hash: null, token_ids: prompt.slice(0, 3 * BLOCK),
      block_size: BLOCK, lora_id: null, medium: "GPU", lora_name: null, extra_keys: [null, null, null], group_idx: 0,
      kv_cache_spec_kind: "full_attention",
    });
    expect((first["block_hashes"] as unknown[]).map(hashText)).toEqual(expectedHashes(prompt));
  });

  test("a prefix-cache hit announces the cached prefix again, with no parent", () => {
    const want = expectedHashes(tokens(1, 3 * BLOCK + 5));
    const stored = storedEvents(messages, "GPU").map(({ e }) => e);
    const again = stored.filter((e) => e["parent_block_hash"] === null && (e["block_hashes"] as unknown[]).map(hashText).join() === want.join());
    // computed (1), hit (2), recomputed after eviction (4)
    expect(again.length).toBeGreaterThanOrEqual(3);
  });

  test("blocks computed after the first are chained on the block before", () => {
    const chained = storedEvents(messages, "GPU").map(({ e }) => e).filter((e) => e["parent_block_hash"] !== null);
    expect(chained.length).toBeGreaterThan(0);
    const all = new Set(storedEvents(messages, "GPU").flatMap(({ e }) => (e["block_hashes"] as unknown[]).map(hashText)));
    for (const e of chained) expect(all.has(hashText(e["parent_block_hash"]))).toBe(true);
  });

  test("an evicted prefix shows as BlockRemoved, then BlockStored again", () => {
    const want = expectedHashes(tokens(1, 3 * BLOCK + 5));
    for (const h of want) {
      const removed = removedEvents(messages, "GPU").filter(({ e }) => (e["block_hashes"] as unknown[]).map(hashText).includes(h));
      expect(removed.length).toBeGreaterThanOrEqual(1);
      const firstRemoved = removed[0]!;
      expect(firstRemoved.e).toEqual({ type: "BlockRemoved", block_hashes: [expect.anything()], medium: "GPU", group_idx: 0 });
      const storedAfter = storedEvents(messages, "GPU").filter(({ seq, e }) => seq > firstRemoved.seq && (e["block_hashes"] as unknown[]).map(hashText).includes(h));
      expect(storedAfter.length).toBeGreaterThanOrEqual(1);
    }
  });

  test("every removed hash was stored before", () => {
    const seen = new Set<string>();
    for (const m of messages) {
      for (const e of m.events) {
        const hashes = (e["block_hashes"] as unknown[] | undefined ?? []).map(hashText);
        if (e["type"] === "BlockStored") for (const h of hashes) seen.add(h);
        if (e["type"] === "BlockRemoved") for (const h of hashes) expect(seen.has(h)).toBe(true);
      }
    }
  });

  test("the tokens /v1/completions/render gives a router hash to the keys the engine then announces", () => {
    expect(rendered.length).toBeGreaterThanOrEqual(2 * BLOCK);
    const want = expectedHashes(rendered);
    const got = storedEvents(messages, "GPU").map(({ e }) => e).find((e) => e["parent_block_hash"] === null && (e["token_ids"] as number[]).join() === rendered.slice(0, want.length * BLOCK).join());
    expect(got).toBeDefined();
    expect((got!["block_hashes"] as unknown[]).map(hashText)).toEqual(want);
  });

  test("the replay socket returns the asked range, then the end marker", () => {
    const start = Math.floor(messages.length / 2);
    const got = replay(`tcp://127.0.0.1:${replayPort}`, start);
    expect(got.at(-1)).toEqual({ end: true });
    const replayed = got.slice(0, -1) as unknown as Message[];
    expect(replayed.map((m) => m.seq)).toEqual(messages.slice(start).map((m) => m.seq));
    expect(replayed).toEqual(messages.slice(start));
  });
});

describe.skipIf(!hasDeps)("fennec serve --kv-events-config --kv-offloading-size", () => {
  let server: ServerProcess;
  let cpuBlocks: number;
  let messages: Message[] = [];
  const prompts = [1, 2, 3, 4].map((s) => tokens(100 + s, 3 * BLOCK + 2));

  beforeAll(async () => {
    const pubPort = freePort();
    // a CPU tier of a few blocks: storing four prompts of three blocks each evicts the first ones
    server = await startServer(["--kv-offloading-size", "0.00004", "--kv-events-config", eventsConfig(pubPort, null)], { env: { PYTHONHASHSEED: "0" } });
    cpuBlocks = Number(/(\d+) CPU blocks/.exec(server.log())?.[1]);
    const sub = await collect(`tcp://127.0.0.1:${pubPort}`, IDLE_S);
    for (const p of prompts) await complete(server, p, 6);
    // the last stores settle at the next step's drain
    await complete(server, tokens(999, 5), 2);
    messages = await sub.messages();
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
  });

  test("the tier holds fewer blocks than the prompts", () => {
    expect(cpuBlocks).toBeGreaterThanOrEqual(1);
    expect(cpuBlocks).toBeLessThan(9);
  });

  test("written blocks are announced with medium CPU and the same hashes as the primary pool's", () => {
    const cpu = storedEvents(messages, "CPU");
    expect(cpu.length).toBeGreaterThan(0);
    for (const { e } of cpu) {
      expect(e).toEqual({
        type: "BlockStored", block_hashes: expect.any(Array), parent_block_hash: null, token_ids: [], block_size: BLOCK,
        lora_id: null, medium: "CPU", lora_name: null, group_idx: 0,
      });
    }
    const gpu = new Set(storedEvents(messages, "GPU").flatMap(({ e }) => (e["block_hashes"] as unknown[]).map(hashText)));
    const cpuHashes = cpu.flatMap(({ e }) => (e["block_hashes"] as unknown[]).map(hashText));
    for (const h of cpuHashes) expect(gpu.has(h)).toBe(true);
    // the first prompt's blocks reached the tier
    expect(cpuHashes).toEqual(expect.arrayContaining(expectedHashes(prompts[0]!)));
  });

  test("blocks the tier drops are BlockRemoved with medium CPU, after they were stored there", () => {
    const removed = removedEvents(messages, "CPU");
    expect(removed.length).toBeGreaterThan(0);
    const cpu = storedEvents(messages, "CPU");
    for (const { seq, e } of removed) {
      expect(e).toEqual({ type: "BlockRemoved", block_hashes: [expect.anything()], medium: "CPU", group_idx: 0 });
      const h = hashText((e["block_hashes"] as unknown[])[0]);
      expect(cpu.some((s) => s.seq < seq && (s.e["block_hashes"] as unknown[]).map(hashText).includes(h))).toBe(true);
    }
  });
});
