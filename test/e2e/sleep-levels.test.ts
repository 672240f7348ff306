/**
 * vLLM's sleep levels on the real server with a model file of some size (make-model's smollm2 shape, 6 layers, q8_0):
 * level 1 keeps the weights in host memory (the process's RSS asleep is the model file's size above level 2's) and its
 * wake_up reads no file (it works with the file moved away); level 2 keeps nothing and its wake_up reads the file
 * (it fails while the file is away, then works once it is back). Both restore the same greedy token ids. And vLLM's
 * POST /reset_prefix_cache: the prefix-cache hit counter grows for a repeated prompt, not for the first one after a
 * reset; it is a dev-mode route (404 without VLLM_SERVER_DEV_MODE=1).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { MODEL_SHAPES } from "../../scripts/model-shapes.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-sleep-levels-"));
const MODEL = join(dir, "smollm.gguf");
const AWAY = join(dir, "smollm.gguf.away");
const servers: ServerProcess[] = [];
const DEV = { env: { VLLM_SERVER_DEV_MODE: "1" } };
// a small KV cache: what sleep frees beyond it is the weights
const ARGS = ["--model", MODEL, "--threads", "1", "--max-model-len", "256", "--kv-cache-memory", "8M"];

beforeAll(() => {
  const vocab = readGguf(llamaVocabPath("gpt-2"));
  if (!vocab.ok) throw new Error(vocab.error);
  writeGgufFile(MODEL, randomModel({ shapeName: "smollm2-135m", shape: { ...MODEL_SHAPES["smollm2-135m"]!, numLayers: 6 }, type: "q8_0", seed: 3, vocab: vocab.value }));
}, 120_000);
afterAll(async () => {
  for (const s of servers) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
}

async function greedyIds(url: string, prompt = "Once upon a time"): Promise<{ status: number; ids: number[] }> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: 16, temperature: 0, return_token_ids: true }),
  });
  const body = await response.json() as { choices?: { token_ids: number[] }[] };
  return { status: response.status, ids: body.choices?.[0]?.token_ids ?? [] };
}

/** RSS once the process settled (the stopped Worker's memory returned) */
async function settledRss(pid: number): Promise<number> {
  await Bun.sleep(800);
  return rssMiB(pid);
}

describe("sleep levels", () => {
  test("level 1 keeps the weights in host memory and wakes without the file; level 2 keeps nothing and reads it again", async () => {
    const fileMiB = statSync(MODEL).size / 2 ** 20;
    const server = await startServer([...ARGS, "--enable-sleep-mode"], DEV);
    servers.push(server);
    const pid = server.process.pid;
    const before = await greedyIds(server.url);
    expect(before.status).toBe(200);
    expect(before.ids).toHaveLength(16);
    const awake = await settledRss(pid);

    // level 1: the engine stops, the file's bytes stay; wake_up works with the file gone
    expect((await fetch(`${server.url}/sleep?level=1`, { method: "POST" })).status).toBe(200);
    const level1 = await settledRss(pid);
    renameSync(MODEL, AWAY);
    try {
      expect((await fetch(`${server.url}/wake_up`, { method: "POST" })).status).toBe(200);
    } finally {
      renameSync(AWAY, MODEL);
    }
    expect(server.log()).toContain("weights from host memory");
    expect(await greedyIds(server.url)).toEqual(before);
    const awakeAgain = await settledRss(pid);

    // level 2: nothing stays; wake_up needs the file
    expect((await fetch(`${server.url}/sleep?level=2`, { method: "POST" })).status).toBe(200);
    const level2 = await settledRss(pid);
    renameSync(MODEL, AWAY);
    let refused: number;
    try {
      refused = (await fetch(`${server.url}/wake_up`, { method: "POST" })).status;
    } finally {
      renameSync(AWAY, MODEL);
    }
    expect(refused).toBe(500);
    expect(await (await fetch(`${server.url}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
    expect((await fetch(`${server.url}/wake_up`, { method: "POST" })).status).toBe(200);
    expect(server.log()).toContain("weights read from the model file");
    expect(await greedyIds(server.url)).toEqual(before);

    console.log(`model file ${fileMiB.toFixed(1)} MiB; RSS awake ${awake.toFixed(1)}, level 1 ${level1.toFixed(1)}, awake again ${awakeAgain.toFixed(1)}, level 2 ${level2.toFixed(1)} MiB`);
    // each level frees the engine's copy of the weights; level 1 holds the file's bytes that level 2 lets go
    expect(awake - level2).toBeGreaterThan(fileMiB * 0.8);
    expect(level1 - level2).toBeGreaterThan(fileMiB * 0.8);
    expect(level1 - level2).toBeLessThan(fileMiB * 1.5);
    // after wake-up from level 1 the host copy is not held twice
    expect(awakeAgain - awake).toBeLessThan(fileMiB * 0.5);
  }, 180_000);

  test("POST /reset_prefix_cache: the next repeat of a prompt is a miss; dev mode only", async () => {
    const plain = await startServer(ARGS);
    servers.push(plain);
    expect((await fetch(`${plain.url}/reset_prefix_cache`, { method: "POST" })).status).toBe(404);
    await plain.stop();

    const server = await startServer(ARGS, DEV);
    servers.push(server);
    // several full blocks of 16 tokens
    const prompt = "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun and the birds sing in the tall green trees.";
    const hits = async (): Promise<number> => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      return Number(/^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)$/m.exec(text)![1]);
    };
    const first = await greedyIds(server.url, prompt);
    expect(first.status).toBe(200);
    const h0 = await hits();
    expect((await greedyIds(server.url, prompt)).ids).toEqual(first.ids);
    const h1 = await hits();
    expect(h1).toBeGreaterThan(h0);

    const reset = await fetch(`${server.url}/reset_prefix_cache`, { method: "POST" });
    expect(reset.status).toBe(200);
    expect(await reset.text()).toBe("");
    expect(server.log()).toContain("Resetting prefix cache...");
    expect((await greedyIds(server.url, prompt)).ids).toEqual(first.ids);
    const h2 = await hits();
    expect(h2).toBe(h1);
    expect((await greedyIds(server.url, prompt)).ids).toEqual(first.ids);
    expect(await hits()).toBeGreaterThan(h2);
    console.log(`prefix cache hits: ${h0} after the first request, ${h1} after a repeat, ${h2} after a reset and a repeat`);

    const bad = await fetch(`${server.url}/reset_prefix_cache?reset_running_requests=maybe`, { method: "POST" });
    expect(bad.status).toBe(400);

    // a running request holds blocks: 409 (vLLM's HTTPException), unless reset_running_requests preempts it; it is
    // recomputed and ends with the tokens it gets alone
    const alone = await fetch(`${server.url}/v1/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt, max_tokens: 120, temperature: 0, ignore_eos: true, return_token_ids: true }),
    });
    const aloneIds = ((await alone.json()) as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids;
    const stream = await fetch(`${server.url}/v1/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt, max_tokens: 120, temperature: 0, ignore_eos: true, return_token_ids: true, stream: true }),
    });
    const reader = stream.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value, { stream: true }); // the first chunk: the request runs
    const busy = await fetch(`${server.url}/reset_prefix_cache`, { method: "POST" });
    expect(busy.status).toBe(409);
    expect(await busy.json()).toEqual({ error: { message: "Prefix cache reset failed.", type: "Conflict", param: null, code: 409 } });
    expect((await fetch(`${server.url}/reset_prefix_cache?reset_running_requests=true`, { method: "POST" })).status).toBe(200);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const ids = text.split("\n").filter((l) => l.startsWith("data: {")).flatMap((l) => (JSON.parse(l.slice(6)) as { choices: { token_ids?: number[] }[] }).choices[0]?.token_ids ?? []);
    expect(ids).toEqual(aloneIds);
  }, 120_000);
});
