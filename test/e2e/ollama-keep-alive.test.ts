/**
 * Ollama's keep_alive against the server as a process, through the `ollama` npm library. With several models (the
 * registry behind server/model-router.ts) it is Ollama's: keep_alive 0 unloads the model once the request ends, the
 * empty-prompt request with keep_alive 0 is Ollama's unload call (done_reason "unload"), and the next request loads
 * the model again and reports the wait as load_duration. A server of one model does the same with its only model's
 * engine (server/single-model-keep-alive.ts): its front end stays, /health answers throughout, and the model stays
 * loaded by default (no --keep-alive) once loaded again.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ollama } from "ollama";
import { checkOllama } from "../server/ollama-schemas.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(120_000);

const MODEL = join(import.meta.dir, "..", "..", "build", "default-model.gguf");
const dir = mkdtempSync(join(tmpdir(), "fennec-keep-alive-"));
let server: ServerProcess;
let ollama: Ollama;

beforeAll(async () => {
  for (const name of ["a", "b"]) copyFileSync(MODEL, join(dir, `${name}.gguf`));
  server = await startServer([join(dir, "a.gguf"), join(dir, "b.gguf"), "--threads", "1"]);
  ollama = new Ollama({ host: server.url });
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The names /api/ps lists once it settles (an unload finishes just after the response). */
async function running(expectLoaded: boolean, name: string): Promise<string[]> {
  let names: string[] = [];
  for (let i = 0; i < 50; i++) {
    names = (await ollama.ps()).models.map((m) => m.name);
    if (names.includes(name) === expectLoaded) break;
    await Bun.sleep(100);
  }
  return names;
}

describe("keep_alive with several models", () => {
  test("keep_alive 0 on a generation: answered, then unloaded; the next request loads it again", async () => {
    const first = await ollama.generate({ model: "a", prompt: "Once upon a time", options: { num_predict: 4, temperature: 0 }, keep_alive: 0 });
    expect(first.done).toBe(true);
    expect(first.eval_count).toBe(4);
    checkOllama("generate", first);
    expect(await running(false, "a")).not.toContain("a");
    expect(server.log()).toMatch(/unloading model a \(keep_alive 0\)/);
    const again = await ollama.generate({ model: "a", prompt: "Once upon a time", options: { num_predict: 4, temperature: 0 } });
    // the same model, loaded afresh: the same greedy answer
    expect(again.response).toBe(first.response);
    // the wait for the load, as Ollama reports it (nanoseconds)
    expect(again.load_duration).toBeGreaterThan(0);
    expect(await running(true, "a")).toContain("a");
    // loaded already: no load to wait for
    const warm = await ollama.generate({ model: "a", prompt: "Once upon a time", options: { num_predict: 2 } });
    expect(warm.load_duration ?? 0).toBe(0);
  });

  test("the unload call: an empty chat or generate with keep_alive 0 answers done_reason unload", async () => {
    await ollama.chat({ model: "b", messages: [{ role: "user", content: "Hi" }], options: { num_predict: 2 } });
    expect(await running(true, "b")).toContain("b");
    const unload = await ollama.chat({ model: "b", messages: [], keep_alive: 0 });
    checkOllama("chat", unload);
    expect(unload).toMatchObject({ model: "b:latest", done: true, done_reason: "unload", message: { role: "assistant", content: "" } });
    expect(await running(false, "b")).not.toContain("b");
    const generate = await ollama.generate({ model: "a", prompt: "", keep_alive: 0 });
    checkOllama("generate", generate);
    expect(generate).toMatchObject({ done: true, done_reason: "unload", response: "" });
    expect(await running(false, "a")).toEqual([]);
  });

  test("a keep_alive Ollama would refuse is still Ollama's 400 behind the router", async () => {
    const bad = await ollama.generate({ model: "a", prompt: "Hi", keep_alive: "5 minutes" }).then(() => null, (e: unknown) => e);
    expect(bad).toMatchObject({ status_code: 400 });
    expect(String((bad as Error).message)).toContain('invalid duration "5 minutes"');
  });
});

describe("keep_alive across routes and body forms", () => {
  test("a request without keep_alive, of either dialect, restores the default: the model stays after an unload", async () => {
    await ollama.generate({ model: "a", prompt: "", keep_alive: 0 });
    expect(await running(false, "a")).not.toContain("a");
    // an OpenAI request loads it again; its default keep-alive (5 minutes) applies, not the earlier 0
    const res = await fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "a", prompt: "Once", max_tokens: 2 }) });
    expect(res.status).toBe(200);
    await Bun.sleep(300);
    expect(await running(true, "a")).toContain("a");
  });

  test("Ollama's `curl -d` form (no JSON Content-Type) picks the model and applies keep_alive 0", async () => {
    await ollama.generate({ model: "b", prompt: "Hi", options: { num_predict: 1 } });
    expect(await running(true, "b")).toContain("b");
    const res = await fetch(`${server.url}/api/generate`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: JSON.stringify({ model: "b", prompt: "Hi", stream: false, options: { num_predict: 1 }, keep_alive: 0 }) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { model: string }).model).toBe("b:latest");
    expect(await running(false, "b")).not.toContain("b");
  });
});

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
}

describe("keep_alive 0 on a server of one model", () => {
  let one: ServerProcess;
  let client: Ollama;
  beforeAll(async () => {
    one = await startServer([MODEL, "--served-model-name", "solo", "--threads", "1"]);
    client = new Ollama({ host: one.url });
  });
  afterAll(async () => {
    await one?.stop();
  });

  /** /api/ps's names once it shows the model loaded (or not) */
  async function soloRunning(expectLoaded: boolean): Promise<string[]> {
    let names: string[] = [];
    for (let i = 0; i < 50; i++) {
      names = (await client.ps()).models.map((m) => m.name);
      if (names.includes("solo:latest") === expectLoaded) break;
      await Bun.sleep(100);
    }
    return names;
  }

  test("the engine is unloaded after the request, memory comes back, /health stays 200; the next chat loads it and answers the same", async () => {
    const pid = one.process.pid;
    const messages = [{ role: "user", content: "Once upon a time" }];
    const options = { num_predict: 8, temperature: 0 };
    const first = await client.chat({ model: "solo", messages, options });
    checkOllama("chat", first);
    expect(first.load_duration ?? 0).toBe(0);
    expect(await soloRunning(true)).toEqual(["solo:latest"]);
    const loadedRss = rssMiB(pid);

    const last = await client.chat({ model: "solo", messages, options, keep_alive: 0 });
    expect(last.message.content).toBe(first.message.content);
    expect(await soloRunning(false)).toEqual([]);
    expect(one.log()).toMatch(/unloading model solo \(keep_alive 0\)/);
    expect((await fetch(`${one.url}/health`)).status).toBe(200);
    await Bun.sleep(800);
    const unloadedRss = rssMiB(pid);
    console.log(`RSS: ${loadedRss.toFixed(1)} MiB loaded, ${unloadedRss.toFixed(1)} MiB after keep_alive 0`);
    expect(unloadedRss).toBeLessThan(loadedRss);
    // listing the models and /metrics do not load it
    expect((await fetch(`${one.url}/v1/models`)).status).toBe(200);
    expect((await fetch(`${one.url}/metrics`)).status).toBe(200);
    expect(await soloRunning(false)).toEqual([]);

    // /health answers while the next request waits for the load
    const again = client.chat({ model: "solo", messages, options });
    expect((await fetch(`${one.url}/health`)).status).toBe(200);
    const reloaded = await again;
    checkOllama("chat", reloaded);
    expect(reloaded.message.content).toBe(first.message.content);
    expect(reloaded.load_duration).toBeGreaterThan(0);
    // no --keep-alive: a request without keep_alive leaves it loaded for good, as before
    await Bun.sleep(300);
    expect(await soloRunning(true)).toEqual(["solo:latest"]);
    const warm = await client.chat({ model: "solo", messages, options });
    expect(warm.load_duration ?? 0).toBe(0);
  });

  test("the unload call answers done_reason unload; an OpenAI request loads the model again", async () => {
    const unload = await client.generate({ model: "solo", prompt: "", keep_alive: 0 });
    checkOllama("generate", unload);
    expect(unload).toMatchObject({ done: true, done_reason: "unload", response: "" });
    expect(await soloRunning(false)).toEqual([]);
    const res = await fetch(`${one.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "solo", prompt: "Once", max_tokens: 2 }) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(2);
    expect(await soloRunning(true)).toEqual(["solo:latest"]);
  });

  test("a positive keep_alive without --keep-alive only sets the expiry: the model stays", async () => {
    await client.generate({ model: "solo", prompt: "Hi", options: { num_predict: 1 }, keep_alive: 0.2 });
    await Bun.sleep(600);
    expect(await soloRunning(true)).toEqual(["solo:latest"]);
  });
});
