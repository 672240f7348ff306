/**
 * vLLM's sleep mode on the real server: the dev routes exist only with VLLM_SERVER_DEV_MODE=1, /sleep without
 * --enable-sleep-mode is a 400, and with it each level stops the engine (the process's RSS falls, measured), requests
 * while asleep are 503, the sleep-state gauge follows, and /wake_up brings back the same greedy token ids.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { startServer, type ServerProcess } from "./server-process.ts";

const servers: ServerProcess[] = [];
afterAll(async () => { for (const s of servers) await s.stop(); });

const DEV = { env: { VLLM_SERVER_DEV_MODE: "1" } };
// a KV cache large enough that its release shows in the process's RSS
const ARGS = ["--threads", "1", "--kv-cache-memory", String(256 * 2 ** 20)];

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
}

async function greedyIds(url: string): Promise<{ status: number; ids: number[] }> {
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 24, temperature: 0, return_token_ids: true }),
  });
  const body = await response.json() as { choices?: { token_ids: number[] }[] };
  return { status: response.status, ids: body.choices?.[0]?.token_ids ?? [] };
}

async function sleepState(url: string): Promise<string | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return /vllm:engine_sleep_state\{[^}]*sleep_state="(\w+)"\} 1/.exec(text)?.[1];
}

describe("sleep mode", () => {
  test("the dev routes need VLLM_SERVER_DEV_MODE=1, and /sleep needs --enable-sleep-mode", async () => {
    const plain = await startServer(["--threads", "1", "--enable-sleep-mode"]);
    servers.push(plain);
    expect((await fetch(`${plain.url}/sleep?level=1`, { method: "POST" })).status).toBe(404);
    await plain.stop();
    const dev = await startServer(["--threads", "1"], DEV);
    servers.push(dev);
    const refused = await fetch(`${dev.url}/sleep?level=1`, { method: "POST" });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain("--enable-sleep-mode");
    await dev.stop();
  }, 60_000);

  test("levels 1 and 2 stop the engine and free its memory; requests while asleep are 503; wake_up restores the same ids", async () => {
    const server = await startServer([...ARGS, "--enable-sleep-mode"], DEV);
    servers.push(server);
    const pid = server.process.pid;
    const before = await greedyIds(server.url);
    expect(before.status).toBe(200);
    expect(before.ids).toHaveLength(24);
    expect(await sleepState(server.url)).toBe("awake");
    expect(await (await fetch(`${server.url}/is_sleeping`)).json()).toEqual({ is_sleeping: false });

    for (const [level, state] of [[1, "weights_offloaded"], [2, "discard_all"]] as const) {
      const awakeRss = rssMiB(pid);
      expect((await fetch(`${server.url}/sleep?level=${level}`, { method: "POST" })).status).toBe(200);
      expect(await (await fetch(`${server.url}/is_sleeping`)).json()).toEqual({ is_sleeping: true });
      expect(await sleepState(server.url)).toBe(state);
      Bun.gc?.(true);
      await Bun.sleep(500);
      const asleepRss = rssMiB(pid);
      console.log(`level ${level}: RSS ${awakeRss.toFixed(1)} MiB awake, ${asleepRss.toFixed(1)} MiB asleep`);
      // the 256 MiB KV cache (and the weights) left the process
      expect(awakeRss - asleepRss).toBeGreaterThan(128);
      expect((await greedyIds(server.url)).status).toBe(503);
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      expect((await fetch(`${server.url}/wake_up`, { method: "POST" })).status).toBe(200);
      expect(await (await fetch(`${server.url}/is_sleeping`)).json()).toEqual({ is_sleeping: false });
      expect(await sleepState(server.url)).toBe("awake");
      expect(await greedyIds(server.url)).toEqual(before);
    }
    expect((await fetch(`${server.url}/sleep?level=3`, { method: "POST" })).status).toBe(400);
  }, 90_000);
});
