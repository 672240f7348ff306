/**
 * Prefill and decode in two real fennec processes behind `fennec proxy`, all on loopback: the
 * prefill server is a NixlConnector kv_producer, the decode server a kv_consumer that loads the prompt's blocks over
 * fennec's side channel. Greedy output through the proxy equals a single server's for the same requests (completions
 * and chat, streamed and not, 1 and 8 at once); each leg shows in its own instance's access log and /metrics.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parseExposition, sampleValue, type Sample } from "../metrics/exposition.ts";
import { freePort, serverCommand, startServer, type ServerProcess } from "./server-process.ts";
import { post } from "./pd-peers.ts";

const PROXY = [...serverCommand().slice(0, -1), "proxy"];
const ENGINE = ["--threads", "1", "--max-num-seqs", "8"];
let single: ServerProcess, prefill: ServerProcess, decode: ServerProcess, proxy: ServerProcess;

beforeAll(async () => {
  const transfer = (role: string): string => JSON.stringify({ kv_connector: "NixlConnector", kv_role: role });
  [single, prefill, decode] = await Promise.all([
    startServer(ENGINE),
    startServer([...ENGINE, "--kv-transfer-config", transfer("kv_producer")], { env: { VLLM_NIXL_SIDE_CHANNEL_HOST: "127.0.0.1", VLLM_NIXL_SIDE_CHANNEL_PORT: String(freePort()) } }),
    startServer([...ENGINE, "--kv-transfer-config", transfer("kv_consumer")], { env: { VLLM_NIXL_SIDE_CHANNEL_HOST: "127.0.0.1", VLLM_NIXL_SIDE_CHANNEL_PORT: String(freePort()) } }),
  ]);
  proxy = await startServer(["--prefill", prefill.url, "--decode", decode.url], { command: PROXY });
  // four processes starting at once on a loaded machine (from the sources when dist/ is older than src/)
}, 240_000);
afterAll(async () => {
  await Promise.all([proxy, single, prefill, decode].map((s) => s?.stop()));
});

const PROMPTS = ["Once upon a time", "The little dog ran to the park and", "Lily saw a big red ball", "Tom had a toy car", "One day a cat", "The sun was hot", "Sam and Mia went", "A bird sat on a tree"];

async function metrics(server: ServerProcess): Promise<Sample[]> {
  return parseExposition(await (await fetch(`${server.url}/metrics`)).text());
}

/** The generated text of a completion or chat answer, streamed or not. */
async function textOf(r: Response, chat: boolean, stream: boolean): Promise<string> {
  expect(r.status).toBe(200);
  if (!stream) {
    const body = (await r.json()) as { choices: { text?: string; message?: { content: string } }[] };
    return chat ? body.choices[0]!.message!.content : body.choices[0]!.text!;
  }
  let text = "";
  for (const line of (await r.text()).split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: { text?: string; delta?: { content?: string } }[]; error?: unknown };
    expect(chunk.error).toBeUndefined();
    text += chat ? chunk.choices[0]?.delta?.content ?? "" : chunk.choices[0]?.text ?? "";
  }
  return text;
}

describe("prefill and decode in two fennec processes behind fennec proxy", () => {
  for (const chat of [false, true]) {
    for (const stream of [false, true]) {
      test(`${chat ? "chat" : "completions"}${stream ? ", streamed" : ""}: greedy output equals a single server's, 1 then 8 at once`, async () => {
        const path = chat ? "chat" : "completions";
        const body = (prompt: string): Record<string, unknown> => ({
          ...(chat ? { messages: [{ role: "user", content: prompt }] } : { prompt }), max_tokens: 12, temperature: 0, ignore_eos: true, stream,
        });
        for (const batch of [PROMPTS.slice(0, 1), PROMPTS]) {
          const [expected, got] = await Promise.all([
            Promise.all(batch.map(async (p) => textOf(await post(single.url, path, body(p)), chat, stream))),
            Promise.all(batch.map(async (p) => textOf(await post(proxy.url, path, body(p)), chat, stream))),
          ]);
          expect(got).toEqual(expected);
          expect(got.every((t) => t.length > 0)).toBe(true);
        }
      }, 120_000);
    }
  }

  test("each leg shows in its instance: prefill computes the prompt, decode loads it as external KV and counts one transfer", async () => {
    const [p0, d0] = await Promise.all([metrics(prefill), metrics(decode)]);
    const r = await post(proxy.url, "completions", { prompt: "The little dog ran to the park and saw a big red ball", max_tokens: 6, temperature: 0, ignore_eos: true });
    const answer = (await r.json()) as { usage: { prompt_tokens: number } };
    expect(r.status).toBe(200);
    const id = r.headers.get("x-request-id")!;
    const [p1, d1] = await Promise.all([metrics(prefill), metrics(decode)]);
    const delta = (a: Sample[], b: Sample[], name: string, filter: Record<string, string> = {}): number => sampleValue(b, name, filter) - sampleValue(a, name, filter);
    const prompt = answer.usage.prompt_tokens;
    // prefill: the prompt computed here, one token generated
    expect(delta(p0, p1, "vllm:prompt_tokens_total")).toBe(prompt);
    expect(delta(p0, p1, "vllm:generation_tokens_total")).toBe(1);
    // decode: the prompt arrived as KV, only the new tokens computed; one NIXL-family transfer observed
    expect(delta(d0, d1, "vllm:prompt_tokens_by_source_total", { source: "external_kv_transfer" })).toBeGreaterThan(0);
    expect(delta(d0, d1, "vllm:generation_tokens_total")).toBe(6);
    expect(delta(d0, d1, "vllm:nixl_xfer_time_seconds_count") + delta(p0, p1, "vllm:nixl_xfer_time_seconds_count")).toBe(1);
    // both access logs have the leg, and the proxy's log names both servers for this request
    await Bun.sleep(100);
    expect(prefill.log()).toMatch(/\[access\] 127\.0\.0\.1:\d+ - "POST \/v1\/completions HTTP\/1\.1" 200 OK/);
    expect(decode.log()).toMatch(/\[access\] 127\.0\.0\.1:\d+ - "POST \/v1\/completions HTTP\/1\.1" 200 OK/);
    expect(proxy.log()).toContain(`${id}: prefill ${prefill.url}`);
    expect(proxy.log()).toContain(`decode ${decode.url}`);
  }, 60_000);

  // last: it stops the prefill server
  test("the prefill server gone: the proxy answers a 502 naming it at once and /health turns 503, the decode server stays healthy", async () => {
    await prefill.stop();
    const started = performance.now();
    const r = await post(proxy.url, "chat", { messages: [{ role: "user", content: "hi" }], max_tokens: 4, stream: true });
    expect(r.status).toBe(502);
    expect(((await r.json()) as { error: { message: string } }).error.message).toStartWith(`prefill server ${prefill.url} cannot be reached`);
    expect(performance.now() - started).toBeLessThan(5000);
    expect((await fetch(`${proxy.url}/health`)).status).toBe(503);
    expect((await fetch(`${decode.url}/health`)).status).toBe(200);
  }, 30_000);
});
