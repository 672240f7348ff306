/**
 * The server as a process on the default model (stories260K), once on one wasm32 memory and once forced onto several
 * (FENNEC_WASM_MEMORY_BYTES caps a memory's size): the start-up line says how the model was placed, and greedy
 * completions give the same tokens and log-probs. A KV pool larger than the machine is one error line before loading.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { totalmem } from "node:os";
import OpenAI from "openai";
import { runServeExpectingExit, startServer, type ServerProcess } from "./server-process.ts";

const servers: ServerProcess[] = [];
afterAll(async () => { for (const s of servers) await s.stop(); });

async function greedy(url: string): Promise<{ text: string; logprobs: unknown }> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
  const r = await client.completions.create({ model: "stories260K", prompt: ["Once upon a time", "The little dog"], max_tokens: 24, temperature: 0, logprobs: 3 });
  return { text: r.choices.map((c) => c.text).join("|"), logprobs: r.choices.map((c) => c.logprobs) };
}

describe("a model over several wasm32 memories, served", () => {
  test("one memory and a forced split: the start-up line, then the same tokens and log-probs", async () => {
    // a 32 MiB memory holds the activations of a 512-token step, not those of the default 2,048
    const args = ["--threads", "2", "--kv-cache-memory", "16M", "--max-num-batched-tokens", "512"];
    const [one, split] = await Promise.all([startServer(args), startServer(args, { env: { FENNEC_WASM_MEMORY_BYTES: "32M" } })]);
    servers.push(one, split);
    expect(one.log()).toMatch(/\[serve\.ts\] memory: 1 wasm32 memory; #0 layers 0-4: [\d.]+ MiB weights \+ 16\.0 MiB KV; [\d.]+ MiB activations per memory; \d+ KV blocks of 16 tokens\n/);
    expect(split.log()).toMatch(/\[serve\.ts\] memory: [2-5] wasm32 memories of at most 32\.0 MiB; #0 layers? 0(-\d)?: [\d.]+ MiB weights \+ [\d.]+ MiB KV; #1 /);
    const [a, b] = await Promise.all([greedy(one.url), greedy(split.url)]);
    expect(a.text.length).toBeGreaterThan(20);
    expect(b).toEqual(a);
  }, 120_000);

  test("a KV pool larger than the machine: one line and exit 1, before loading", async () => {
    const gib = Math.ceil(totalmem() / 2 ** 30) + 1;
    const { code, output } = await runServeExpectingExit(["--kv-cache-memory", `${gib}G`]);
    expect(code).toBe(1);
    expect(output).toMatch(new RegExp(`this model needs ${gib}\\.\\d\\d GiB \\([\\d.]+ MiB of weights, ${gib}\\.00 GiB of KV cache, [\\d.]+ MiB of activations\\) and this machine has [\\d.]+ GiB; lower --kv-cache-memory`));
    expect(output).not.toMatch(/\n\s+at /); // no stack trace
  }, 60_000);
});
