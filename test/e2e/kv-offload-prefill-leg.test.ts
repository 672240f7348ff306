/**
 * The prefill leg of disaggregated serving against the binary: a request with `max_tokens: 1` finishes in the step
 * that computed its prompt, and both offload tiers (SimpleCPUOffloadConnector and the native OffloadingConnector of
 * --kv-offloading-size) still store the prompt's full blocks, as vLLM's request_finished does; /metrics shows it.
 */
import { describe, expect, test } from "bun:test";
import { parseExposition, sampleValue } from "../metrics/exposition.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

const WORDS = "once upon a time there was a little girl named lily she loved to play in the park with her dog max".split(" ");
const prompt = (seed: number): string => Array.from({ length: 120 }, (_, i) => WORDS[(i * 7 + seed * 3) % WORDS.length]).join(" ");

async function completeOneToken(server: ServerProcess, text: string): Promise<number> {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: text, max_tokens: 1, temperature: 0 }),
  });
  expect(res.status).toBe(200);
  const body = await res.json() as { usage: { prompt_tokens: number; completion_tokens: number } };
  expect(body.usage.completion_tokens).toBe(1);
  return body.usage.prompt_tokens;
}

async function metric(server: ServerProcess, name: string, labels: Record<string, string> = {}): Promise<number> {
  return sampleValue(parseExposition(await (await fetch(`${server.url}/metrics`)).text()), name, labels);
}

describe("max_tokens 1 (the prefill leg) is stored by the offload tier", () => {
  test("SimpleCPUOffloadConnector: save_outcomes_total{outcome=\"stored\"} counts the prompt's full blocks", async () => {
    const server = await startServer(["--threads", "1", "--kv-transfer-config", JSON.stringify({
      kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both", kv_connector_extra_config: { cpu_bytes_to_use: 50_000_000 },
    })]);
    try {
      const promptTokens = await completeOneToken(server, prompt(1));
      expect(promptTokens).toBeGreaterThan(64);
      expect(await metric(server, "vllm:simple_kv_offload_save_outcomes_total", { outcome: "stored" })).toBe(Math.floor(promptTokens / 16));
    } finally {
      await server.stop();
    }
  }, 150_000);

  test("--kv-offloading-size (OffloadingConnector): kv_offload_store_bytes_total counts the store", async () => {
    const server = await startServer(["--threads", "1", "--kv-offloading-size", "0.05"]);
    try {
      await completeOneToken(server, prompt(2));
      // the store's transfer record is taken when it settles, at the next step: any other request
      await completeOneToken(server, "one more");
      expect(await metric(server, "vllm:kv_offload_store_bytes_total")).toBeGreaterThan(0);
    } finally {
      await server.stop();
    }
  }, 150_000);
});
