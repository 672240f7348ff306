/**
 * Faults of prefill/decode across fennec processes (NixlConnector): the decode side dies mid-transfer (the prefill
 * side frees the pinned blocks at the lease and counts the expiry); the prefill side dies (the decode side answers a
 * 500 that says why, or recomputes, and never hangs); a transfer that lands after its request was aborted is dropped;
 * nothing leaks on either side after 200 random aborts. The servers are real processes; where a dying peer must be
 * timed exactly (half a transfer, a late answer) the test plays that peer on the wire (src/engine/kv-connector/peer-wire.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, createServer, type Server, type Socket } from "node:net";
import { startServer, type ServerProcess } from "./server-process.ts";
import { answerText, blockBytes, eventually, metric, peerArgs, post, prefillBody, proxied, type Json } from "./pd-peers.ts";
import { blocksHeader, controlFrame, FRAME, FrameReader } from "../../src/engine/kv-connector/peer-wire.ts";
import { rng, randomInt } from "../helpers/prng.ts";

const LEASE_S = 2;
let prefill: ServerProcess;
/** kv_consumer, kv_load_failure_policy fail (vLLM's default) */
let decode: ServerProcess;
/** kv_both with kv_load_failure_policy recompute: the decode side that computes the prompt when the read fails */
let recompute: ServerProcess;
let single: ServerProcess;

beforeAll(async () => {
  [prefill, decode, recompute, single] = await Promise.all([
    startServer(peerArgs("kv_producer", { engine_id: "prefill-0" }, LEASE_S)),
    startServer(peerArgs("kv_consumer", {}, LEASE_S)),
    startServer(peerArgs("kv_both", { kv_load_failure_policy: "recompute" }, LEASE_S)),
    startServer(["--block-size", "16"]),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all([prefill?.stop(), decode?.stop(), recompute?.stop(), single?.stop()]);
});

const LONG_PROMPT = Array.from({ length: 14 }, (_, i) => `The little dog number ${i} ran to the park and played with a red ball.`).join(" ");
const body = (prompt: string, extra: Json = {}): Json => ({ prompt, max_tokens: 12, temperature: 0, ...extra });

async function prefillParams(prompt: string): Promise<{ params: Json; numPromptTokens: number }> {
  const res = await post(prefill.url, "completions", prefillBody(body(prompt)));
  const json = await res.json() as Json;
  expect(res.status).toBe(200);
  return { params: json.kv_transfer_params, numPromptTokens: json.usage.prompt_tokens };
}

/** A stand-in prefill side on the wire: `onRead` decides what a READ gets. */
async function fakePrefill(onRead: (socket: Socket, read: Json) => void): Promise<{ server: Server; port: number; done: string[] }> {
  const done: string[] = [];
  const server = createServer((socket) => {
    const reader = new FrameReader(0);
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => {
      const frames = reader.push(new Uint8Array(chunk));
      if (!frames.ok) throw new Error(frames.error);
      for (const f of frames.value) {
        if (f.type === FRAME.read) onRead(socket, f.json);
        if (f.type === FRAME.done) done.push(String(f.json["request_id"]));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as { port: number }).port, done };
}

describe("prefill/decode faults (NixlConnector)", () => {
  test("the decode side dies mid-transfer: the prefill side frees the pinned blocks at the lease and counts the expiry", async () => {
    const { params } = await prefillParams(LONG_PROMPT);
    expect(params.remote_block_ids[0].length).toBeGreaterThan(20);
    expect(await metric(prefill.url, "vllm:kv_cache_usage_perc")).toBeGreaterThan(0);
    const expiredBefore = await metric(prefill.url, "vllm:nixl_num_kv_expired_reqs_total");
    // a decode worker that asks for the blocks and dies after the first bytes (no DONE ever comes)
    const got = await new Promise<number>((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port: params.remote_port }, () => {
        socket.write(controlFrame(FRAME.read, { engine_id: params.remote_engine_id, request_id: params.remote_request_id, block_ids: params.remote_block_ids[0], block_bytes: blockBytes(), block_size: 16 }));
      });
      socket.once("data", (chunk) => { socket.destroy(); resolve(chunk.length); });
      socket.on("error", reject);
    });
    expect(got).toBeLessThan(params.remote_block_ids[0].length * blockBytes());
    // held until the lease runs out, then freed and counted
    await Bun.sleep(LEASE_S * 1000 / 2);
    expect(await metric(prefill.url, "vllm:kv_cache_usage_perc")).toBeGreaterThan(0);
    expect(await eventually(async () => await metric(prefill.url, "vllm:kv_cache_usage_perc") === 0, LEASE_S * 1000 + 5000)).toBe(true);
    expect(await metric(prefill.url, "vllm:nixl_num_kv_expired_reqs_total")).toBe(expiredBefore + 1);
    expect(prefill.log()).toContain(`Releasing expired KV blocks for request ${params.remote_request_id} which were retrieved by 1 remote worker(s) before lease expired.`);
    // a decode request that comes too late gets a 500 saying the lease expired, and the decode side holds nothing
    const late = await post(decode.url, "completions", body(LONG_PROMPT, { kv_transfer_params: params }));
    expect(late.status).toBe(500);
    expect(((await late.json()) as Json).error.message).toContain("lease expired");
    expect(await eventually(async () => await metric(decode.url, "vllm:kv_cache_usage_perc") === 0)).toBe(true);
  }, 60_000);

  test("lease heartbeats: the prefill side keeps blocks a decode instance still waits for; a decode instance sends them while its request queues", async () => {
    const { params } = await prefillParams("Lily and Ben went to the park to play on the swings");
    const expiredBefore = await metric(prefill.url, "vllm:nixl_num_kv_expired_reqs_total");
    const beat = (): Promise<void> => new Promise((resolve) => {
      const socket = connect({ host: "127.0.0.1", port: params.remote_port }, () => socket.end(controlFrame(FRAME.heartbeat, { request_ids: [params.remote_request_id] })));
      socket.on("close", () => resolve());
    });
    // heartbeats every lease / 4 for twice the lease: still held
    for (let t = 0; t < 8; t++) { await beat(); await Bun.sleep(LEASE_S * 1000 / 4); }
    expect(await metric(prefill.url, "vllm:nixl_num_kv_expired_reqs_total")).toBe(expiredBefore);
    expect(await metric(prefill.url, "vllm:kv_cache_usage_perc")).toBeGreaterThan(0);
    // then silence: it expires within lease x 2/3
    expect(await eventually(async () => await metric(prefill.url, "vllm:nixl_num_kv_expired_reqs_total") === expiredBefore + 1, LEASE_S * 1000 + 5000)).toBe(true);

    // the decode side: one sequence at a time, so the second request queues behind a long one and beats meanwhile
    const queued = await startServer([...peerArgs("kv_consumer", {}, 0.6), "--max-num-seqs", "1"]);
    const beats: string[] = [];
    const fake = await fakePrefill((socket) => { socket.end(controlFrame(FRAME.error, { message: "stand-in prefill: no blocks" })); });
    fake.server.on("connection", (socket) => socket.on("data", (chunk: Buffer) => {
      const frames = new FrameReader(0).push(new Uint8Array(chunk));
      if (frames.ok) for (const f of frames.value) if (f.type === FRAME.heartbeat) beats.push(...(f.json["request_ids"] as string[]));
    }));
    try {
      const long = post(queued.url, "completions", { prompt: "Once", max_tokens: 400, ignore_eos: true, temperature: 0 });
      await Bun.sleep(50);
      const waiting = await post(queued.url, "completions", body("The cat sat on the mat", { kv_transfer_params: { ...params, remote_request_id: "waits-in-queue", remote_num_tokens: null, remote_port: fake.port } }));
      expect(waiting.status).toBe(500);
      expect((await long).status).toBe(200);
      expect(beats).toContain("waits-in-queue");
    } finally {
      fake.server.close();
      await queued.stop();
    }
  }, 120_000);

  test("the prefill side dies: the decode side answers a 500 that says why (policy fail) or recomputes (policy recompute), never hangs", async () => {
    const prompt = "Once upon a time there was a little girl named Lily who loved to play outside";
    const expected = await answerText("completions", await post(single.url, "completions", body(prompt)));
    const doomed = await startServer(peerArgs("kv_producer", {}, 30));
    const res = await post(doomed.url, "completions", prefillBody(body(prompt)));
    const params = (await res.json() as Json).kv_transfer_params;
    expect(await doomed.stop("SIGKILL")).not.toBe(0);
    const t0 = Date.now();
    const failed = await post(decode.url, "completions", body(prompt, { kv_transfer_params: params }));
    expect(failed.status).toBe(500);
    const message = ((await failed.json()) as Json).error.message as string;
    expect(message).toContain(`KV transfer from the prefill instance 127.0.0.1:${params.remote_port}`);
    expect(message).toContain('"kv_load_failure_policy":"recompute"');
    const ok = await post(recompute.url, "completions", body(prompt, { kv_transfer_params: params }));
    expect(await answerText("completions", ok)).toBe(expected);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await metric(decode.url, "vllm:nixl_num_failed_transfers_total")).toBeGreaterThanOrEqual(1);
    expect(await metric(recompute.url, "vllm:nixl_num_failed_transfers_total")).toBe(1);
  }, 120_000);

  test("the prefill side dies mid-transfer or never answers: 500 at once, or at the lease; recompute still answers right", async () => {
    const prompt = "Tom had a big red ball. One day he went to the park and met a friendly dog";
    const expected = await answerText("completions", await post(single.url, "completions", body(prompt)));
    const { params } = await prefillParams(prompt);
    // half a block frame, then the connection drops
    const half = await fakePrefill((socket, read) => {
      const n = (read["block_ids"] as number[]).length;
      socket.write(blocksHeader(0, n, n * blockBytes()));
      socket.end(new Uint8Array(blockBytes() / 2));
    });
    const cut = await post(decode.url, "completions", body(prompt, { kv_transfer_params: { ...params, remote_port: half.port } }));
    expect(cut.status).toBe(500);
    expect(((await cut.json()) as Json).error.message).toContain("closed after");
    expect(await answerText("completions", await post(recompute.url, "completions", body(prompt, { kv_transfer_params: { ...params, remote_port: half.port } })))).toBe(expected);
    // a prefill side that accepts the read and then says nothing: the decode side gives up at the lease
    const silent = await fakePrefill(() => {});
    const t0 = Date.now();
    const hung = await post(decode.url, "completions", body(prompt, { kv_transfer_params: { ...params, remote_port: silent.port } }));
    expect(hung.status).toBe(500);
    expect(((await hung.json()) as Json).error.message).toContain("no answer from the prefill instance");
    expect(Date.now() - t0).toBeLessThan(LEASE_S * 1000 + 5000);
    half.server.close();
    silent.server.close();
    expect(await eventually(async () => await metric(decode.url, "vllm:kv_cache_usage_perc") === 0)).toBe(true);
  }, 60_000);

  test("a transfer that lands after its request was aborted is dropped, and the decode side goes on right", async () => {
    const prompt = "The sun was shining and the sky was blue. A little dog ran to the garden to find his bone";
    const { params, numPromptTokens } = await prefillParams(prompt);
    const transfersBefore = await metric(decode.url, "vllm:nixl_xfer_time_seconds_count");
    let sent = false;
    // answers with garbage blocks (0xff: NaN halves) 800 ms late, after the client has gone
    const late = await fakePrefill((socket, read) => {
      const n = (read["block_ids"] as number[]).length;
      setTimeout(() => {
        socket.write(blocksHeader(0, n, n * blockBytes()));
        socket.write(new Uint8Array(n * blockBytes()).fill(0xff));
        sent = true;
      }, 800);
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const aborted = post(decode.url, "completions", body(prompt, { kv_transfer_params: { ...params, remote_port: late.port } }), controller.signal);
    await expect(aborted).rejects.toThrow();
    expect(await eventually(async () => late.done.length === 1, 5000)).toBe(true);
    expect(sent).toBe(true);
    expect(late.done).toEqual([params.remote_request_id]);
    // not counted as a transfer, nothing held, and the same prompt read from the real prefill side answers right
    expect(await metric(decode.url, "vllm:nixl_xfer_time_seconds_count")).toBe(transfersBefore);
    expect(await eventually(async () => await metric(decode.url, "vllm:kv_cache_usage_perc") === 0)).toBe(true);
    const expected = await answerText("completions", await post(single.url, "completions", body(prompt)));
    const pd = await proxied(prefill.url, decode.url, "completions", body(prompt));
    expect(pd.numPromptTokens).toBe(numPromptTokens);
    expect(await answerText("completions", pd.decode)).toBe(expected);
    late.server.close();
  }, 60_000);

  test("a decode request the decode side refuses frees the prefill side's blocks at once, not at the lease", async () => {
    // earlier tests' pins must have run out first (at most one lease), or their blocks would hide this request's release
    expect(await eventually(async () => await metric(prefill.url, "vllm:kv_cache_usage_perc") === 0, LEASE_S * 1000 * 3)).toBe(true);
    const { params } = await prefillParams("Ben and Mia wanted to build a tall tower of blocks");
    // priority is refused by an engine under fcfs: after the params were read, before the request was queued
    const refused = await post(decode.url, "completions", body("Ben and Mia wanted to build a tall tower of blocks", { priority: 1, kv_transfer_params: params }));
    expect(refused.status).toBe(400);
    expect(await eventually(async () => await metric(prefill.url, "vllm:kv_cache_usage_perc") === 0, LEASE_S * 1000 / 2)).toBe(true);
    // freed by the notification: its lease never runs out (earlier tests' pins may expire meanwhile)
    await Bun.sleep(LEASE_S * 1000);
    expect(prefill.log()).not.toContain(`Releasing expired KV blocks for request ${params.remote_request_id} `);
    expect(prefill.log()).toContain("Releasing expired KV blocks for request ");
  }, 30_000);

  test("200 random aborts on either leg: nothing leaks on either side", async () => {
    const random = rng(19);
    const prompts = ["Lily and Ben", "The cat sat on the mat and looked at the bird in the tree", LONG_PROMPT.slice(0, 300), "A frog jumped into the pond"];
    let skipped = 0;
    const one = async (i: number): Promise<void> => {
      const prompt = prompts[i % prompts.length]!;
      const controller = new AbortController();
      const where = randomInt(random, 3); // 0: during the prefill leg, 1: between the legs, 2: during the decode leg
      try {
        if (where === 0) setTimeout(() => controller.abort(), randomInt(random, 15));
        const p = await post(prefill.url, "completions", prefillBody(body(prompt, { max_tokens: 16 })), controller.signal);
        const params = (await p.json() as Json).kv_transfer_params;
        if (where === 1) { skipped++; return; }
        if (where === 2) setTimeout(() => controller.abort(), randomInt(random, 15));
        const d = await post(decode.url, "completions", body(prompt, { max_tokens: 16, kv_transfer_params: params }), controller.signal);
        await d.text();
      } catch {
        // aborted
      }
    };
    for (let i = 0; i < 200; i += 8) await Promise.all(Array.from({ length: 8 }, (_, k) => one(i + k)));
    expect(skipped).toBeGreaterThan(20);
    // the decode side at once; the prefill side once the skipped decode legs' leases ran out
    expect(await eventually(async () => await metric(decode.url, "vllm:kv_cache_usage_perc") === 0 && await metric(decode.url, "vllm:num_requests_running") === 0 && await metric(decode.url, "vllm:num_requests_waiting") === 0)).toBe(true);
    expect(await eventually(async () => await metric(prefill.url, "vllm:kv_cache_usage_perc") === 0 && await metric(prefill.url, "vllm:num_requests_running") === 0, LEASE_S * 1000 + 10_000)).toBe(true);
    expect(await metric(prefill.url, "vllm:nixl_num_kv_expired_reqs_total")).toBeGreaterThanOrEqual(skipped);
    // and both still answer right
    const expected = await answerText("completions", await post(single.url, "completions", body(prompts[1]!)));
    expect(await answerText("completions", (await proxied(prefill.url, decode.url, "completions", body(prompts[1]!))).decode)).toBe(expected);
  }, 120_000);
});
