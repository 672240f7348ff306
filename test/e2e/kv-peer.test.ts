/**
 * Prefill and decode on two real fennec processes (kv_producer, kv_consumer) with fennec's NixlConnector on loopback,
 * the test acting as vLLM's disaggregated proxy (pd-peers.ts): greedy answers equal a single server's (chat and
 * completions, streaming or not, 1 and 8 at once); the decode side counts the prompt as external KV and computes only
 * the last prompt token; the vllm:nixl_* series count one transfer per request with blocks x block bytes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startServer, type ServerProcess } from "./server-process.ts";
import { answerText, BLOCK_SIZE, blockBytes, eventually, metric, peerArgs, post, proxied, type Endpoint, type Json } from "./pd-peers.ts";

let prefill: ServerProcess;
let decode: ServerProcess;
let single: ServerProcess;

beforeAll(async () => {
  // the decode side without prefix caching: every prompt block it holds came over the connector (exact byte counts)
  [prefill, decode, single] = await Promise.all([
    startServer(peerArgs("kv_producer")),
    startServer([...peerArgs("kv_consumer"), "--no-enable-prefix-caching", "--enable-prompt-tokens-details"]),
    startServer(["--block-size", String(BLOCK_SIZE)]),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all([prefill?.stop(), decode?.stop(), single?.stop()]);
});

const PROMPTS = [
  "Once upon a time there was a little girl named Lily who loved to play outside in the park with her friends",
  "The cat sat on the mat and looked at the bird",
  "Tom had a big red ball. One day he went to the park and",
  "Sue",
  "The sun was shining and the sky was blue. A little dog ran to the garden to find his bone, but",
  "Ben and Mia wanted to build a tall tower of blocks in their room before dinner",
  "There once was a kind old man who lived in a small house near the river. Every morning he",
  "A frog jumped",
];

function bodyOf(endpoint: Endpoint, prompt: string, stream: boolean): Json {
  const common = { max_tokens: 20, temperature: 0, stream };
  return endpoint === "chat" ? { ...common, messages: [{ role: "user", content: prompt }] } : { ...common, prompt };
}

/** totals the decode side's metrics must show */
let numTransfers = 0;
let numExternalTokens = 0;
let transferredBytes = 0;

async function compare(endpoint: Endpoint, prompts: readonly string[], stream: boolean): Promise<void> {
  const results = await Promise.all(prompts.map(async (prompt) => {
    const body = bodyOf(endpoint, prompt, stream);
    const [pd, one] = await Promise.all([proxied(prefill.url, decode.url, endpoint, body), post(single.url, endpoint, body)]);
    // the prefill answer names what the decode side reads: the prompt's blocks, on P's engine and side channel
    expect(pd.params).toMatchObject({ do_remote_prefill: true, do_remote_decode: false, remote_host: "127.0.0.1", transfer_mode: "pull", remote_num_tokens: pd.numPromptTokens });
    expect(pd.params.remote_block_ids[0]).toHaveLength(Math.ceil(pd.numPromptTokens / BLOCK_SIZE));
    numTransfers++;
    numExternalTokens += pd.numPromptTokens - 1;
    transferredBytes += Math.ceil((pd.numPromptTokens - 1) / BLOCK_SIZE) * blockBytes();
    return { two: await answerText(endpoint, pd.decode), one: await answerText(endpoint, one) };
  }));
  for (const r of results) {
    expect(r.two.length).toBeGreaterThan(0);
    expect(r.two).toBe(r.one);
  }
}

describe("prefill/decode on two fennec processes (NixlConnector, TCP on loopback)", () => {
  for (const endpoint of ["completions", "chat"] as const) {
    for (const stream of [false, true]) {
      test(`${endpoint}, ${stream ? "streaming" : "not streaming"}: 1 then 8 at once, greedy output equals one server's`, async () => {
        await compare(endpoint, PROMPTS.slice(0, 1), stream);
        await compare(endpoint, PROMPTS, stream);
      }, 120_000);
    }
  }

  test("the decode answer counts the prompt as cached, and the decode leg's own answer has kv_transfer_params null", async () => {
    const body = bodyOf("completions", PROMPTS[0]!, false);
    const pd = await proxied(prefill.url, decode.url, "completions", body);
    const json = await pd.decode.json() as Json;
    expect(json.kv_transfer_params).toBeNull();
    expect(json.usage.prompt_tokens).toBe(pd.numPromptTokens);
    expect(json.usage.prompt_tokens_details.cached_tokens).toBe(pd.numPromptTokens - 1);
    numTransfers++;
    numExternalTokens += pd.numPromptTokens - 1;
    transferredBytes += Math.ceil((pd.numPromptTokens - 1) / BLOCK_SIZE) * blockBytes();
  }, 60_000);

  test("metrics: one transfer per request with blocks x block bytes; the prompt is external KV and only its last token is computed", async () => {
    expect(await metric(decode.url, "vllm:nixl_xfer_time_seconds_count")).toBe(numTransfers);
    expect(await metric(decode.url, "vllm:nixl_post_time_seconds_count")).toBe(numTransfers);
    expect(await metric(decode.url, "vllm:nixl_bytes_transferred_count")).toBe(numTransfers);
    expect(await metric(decode.url, "vllm:nixl_bytes_transferred_sum")).toBe(transferredBytes);
    expect(await metric(decode.url, "vllm:nixl_num_descriptors_count")).toBe(numTransfers);
    expect(await metric(decode.url, "vllm:nixl_num_failed_transfers_total")).toBe(0);
    expect(await metric(decode.url, "vllm:prompt_tokens_by_source_total", { source: "external_kv_transfer" })).toBe(numExternalTokens);
    expect(await metric(decode.url, "vllm:prompt_tokens_by_source_total", { source: "local_compute" })).toBe(numTransfers);
    expect(await metric(decode.url, "vllm:external_prefix_cache_hits_total")).toBe(numExternalTokens);
    expect(await metric(decode.url, "vllm:external_prefix_cache_queries_total")).toBe(numExternalTokens + numTransfers);
    // the prefill side freed every pinned block once it was read: nothing expired, nothing held
    expect(await metric(prefill.url, "vllm:nixl_num_kv_expired_reqs_total")).toBe(0);
    expect(await eventually(async () => await metric(prefill.url, "vllm:kv_cache_usage_perc") === 0)).toBe(true);
    // registered only with the connector
    expect((await (await fetch(`${single.url}/metrics`)).text())).not.toContain("nixl");
    const exposition = await (await fetch(`${decode.url}/metrics`)).text();
    expect(exposition).toContain("# HELP vllm:nixl_num_descriptors Histogram of number of descriptors per NIXL  KV Cache transfers.");
    expect(exposition).toContain('vllm:nixl_xfer_time_seconds_bucket{le="0.005",model_name="stories260K",engine="0"}');
  }, 60_000);

  test("without a connector kv_transfer_params is refused with a 400 that says what to start", async () => {
    const res = await post(single.url, "completions", { prompt: "hi", max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).error.message).toContain("--kv-transfer-config");
    const n2 = await post(prefill.url, "completions", { prompt: "hi", max_tokens: 1, n: 2, kv_transfer_params: { do_remote_decode: true } });
    expect(n2.status).toBe(400);
    const missing = await post(decode.url, "completions", { prompt: "hi", max_tokens: 1, kv_transfer_params: { do_remote_prefill: true } });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as Json).error.message).toContain("remote_block_ids");
  }, 30_000);
});
