// Browser test of the page at `/`: headless Chromium (playwright-core, Debian's chromium) on the real server, with and
// without --api-key. It sends a chat message and sees tokens stream in, stops a long answer, regenerates, checks the
// request carries the page's settings, and sees the metrics view move after more requests. Needs no network.
// FENNEC_SCREENSHOTS=1 also writes docs/web-ui-chat.png and docs/web-ui-metrics.png (the README's screenshots).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

const CHROMIUM = "/usr/bin/chromium";
const KEY = "web-ui-key";
const SCREENSHOTS = process.env.FENNEC_SCREENSHOTS === "1";
let keyed: ServerProcess;
let open: ServerProcess;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/install-test-deps.sh (apt-get install chromium)`);
  // random weights in SmolLM2's shape, one layer: about 4 ms a token here, slow enough to press Stop mid-answer
  const model = await makeModelFile("smollm2-135m", "q8_0", 1);
  [keyed, open, browser] = await Promise.all([
    startServer(["--model", model, "--api-key", KEY, "--enable-per-request-metrics"]),
    startServer(["--model", model]),
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] }),
  ]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([keyed?.stop(), open?.stop()]);
});

/** Re-reads `read` until `ok` holds (bun's expect has no poll); returns the last value, which the caller asserts on. */
async function poll<T>(read: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!ok(value) && Date.now() < deadline) {
    await Bun.sleep(100);
    value = await read();
  }
  return value;
}

const lastAnswer = (page: Page) => page.locator(".msg.assistant").last();

/** Sends one message from the composer; resolves once the answer is no longer streaming. */
async function send(page: Page, text: string): Promise<void> {
  const before = await page.locator(".msg.assistant").count();
  await page.locator("#input").fill(text);
  await page.locator("#input").press("Enter");
  await page.locator(".msg.assistant").nth(before).waitFor();
  await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant")[n]?.getAttribute("data-state") !== "streaming", before, { timeout: 60_000 });
}

async function setField(page: Page, id: string, value: string): Promise<void> {
  await page.locator(`#${id}`).fill(value);
  await page.locator(`#${id}`).dispatchEvent("change");
}

async function exercise(server: ServerProcess, key: string | null): Promise<void> {
  const page = await browser.newPage({ viewport: { width: 900, height: 800 } });
  const offsite: string[] = [];
  const chatBodies: Record<string, unknown>[] = [];
  page.on("request", (r) => {
    if (!r.url().startsWith(server.url)) offsite.push(r.url());
    if (r.url().endsWith("/v1/chat/completions")) chatBodies.push(JSON.parse(r.postData() ?? "{}"));
  });
  await page.goto(server.url);
  if (key !== null) {
    // without the key the page says what to do, and opens Settings where the key goes
    expect(await poll(() => page.locator("#model").innerText(), (t) => t.includes("API key"))).toContain("API key");
    expect(await page.locator("#settings").getAttribute("open")).not.toBeNull();
    await setField(page, "api-key", key);
  } else {
    await page.locator("#settings summary").click();
  }
  expect(await poll(() => page.locator("#model").innerText(), (t) => t.includes("smollm2"))).toContain("smollm2");
  await setField(page, "system", "You are terse.");
  await setField(page, "temperature", "0.5");
  await setField(page, "max-tokens", "12");

  // 1. one short answer, with its timings
  await send(page, "Hello there");
  expect(await lastAnswer(page).getAttribute("data-state")).toBe("done");
  expect((await lastAnswer(page).locator(".text").innerText()).length).toBeGreaterThan(0);
  const meta = await lastAnswer(page).locator(".meta").innerText();
  expect(meta).toMatch(/TTFT \d+\.\d ms · \d+\.\d tok\/s/);
  expect(meta).toContain(key !== null ? "--enable-per-request-metrics)" : "measured in the browser");
  if (key !== null) expect(meta).toMatch(/queue \d+\.\d\d ms/);
  const sent = chatBodies[0]!;
  expect(sent.messages).toEqual([{ role: "system", content: "You are terse." }, { role: "user", content: "Hello there" }]);
  expect([sent.temperature, sent.max_tokens, sent.stream]).toEqual([0.5, 12, true]);

  // 2. a long answer: watch it stream, then stop it
  await setField(page, "max-tokens", "1500");
  const answers = await page.locator(".msg.assistant").count();
  await page.locator("#input").fill("Tell me a long story");
  await page.locator("#input").press("Enter");
  const streaming = page.locator(".msg.assistant").nth(answers);
  await page.waitForFunction((n) => (document.querySelectorAll(".msg.assistant .text")[n]?.textContent ?? "").length > 0, answers);
  const early = (await streaming.locator(".text").innerText()).length;
  await page.waitForFunction(([n, len]) => (document.querySelectorAll(".msg.assistant .text")[n!]?.textContent ?? "").length > len!, [answers, early]);
  expect(await streaming.getAttribute("data-state")).toBe("streaming");
  await page.locator("#stop").click();
  await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant")[n]?.getAttribute("data-state") === "stopped", answers);
  const stoppedText = await streaming.locator(".text").innerText();
  expect(await streaming.locator(".meta").innerText()).toStartWith("stopped");
  await Bun.sleep(300);
  expect(await streaming.locator(".text").innerText()).toBe(stoppedText);
  expect(await page.locator("#send").isVisible()).toBe(true);
  // the server saw the client go: nothing keeps running
  const idle = /vllm:num_requests_running\{[^}]*\} 0/;
  expect(await poll(async () => await (await fetch(`${server.url}/metrics`)).text(), (t) => idle.test(t))).toMatch(idle);

  // 3. regenerate the stopped answer: the same history goes out again, a new answer replaces it
  await setField(page, "max-tokens", "10");
  await streaming.locator(".regen").click();
  await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant")[n]?.getAttribute("data-state") === "done", answers);
  const regenBody = chatBodies[chatBodies.length - 1]!;
  expect((regenBody.messages as { content: string }[]).map((m) => m.content)).toEqual(["You are terse.", "Hello there", await page.locator(".msg.assistant .text").first().innerText(), "Tell me a long story"]);
  if (SCREENSHOTS && key !== null) await page.screenshot({ path: join(import.meta.dir, "..", "..", "docs", "web-ui-chat.png") });

  // 4. the metrics view moves with more requests
  await page.locator("#tab-metrics").click();
  await page.locator("#m-requests").waitFor();
  const successTotal = async (): Promise<number> => {
    const m = /^vllm:request_success_total\{[^}]*\} (\d+)/gm;
    return [...(await (await fetch(`${server.url}/metrics`)).text()).matchAll(m)].reduce((sum, x) => sum + Number(x[1]), 0);
  };
  const finished = await successTotal();
  expect(finished).toBeGreaterThanOrEqual(2);
  const headers: Record<string, string> = { "content-type": "application/json", ...(key === null ? {} : { authorization: `Bearer ${key}` }) };
  for (let i = 0; i < 4; i++) {
    const res = await fetch(`${server.url}/v1/completions`, { method: "POST", headers, body: JSON.stringify({ prompt: `story ${i}`, max_tokens: 40, ignore_eos: true }) });
    expect(res.status).toBe(200);
  }
  expect(await poll(async () => Number(await page.locator("#m-requests .v").innerText()), (n) => n === finished + 4, 15_000)).toBe(finished + 4);
  const tokenPoints = await page.locator('[data-chart="Tokens"] polyline[data-series="generated"]').getAttribute("data-points");
  expect(Number(tokenPoints)).toBeGreaterThan(0);
  expect(await poll(() => page.locator('[data-chart="Time to first token"] .legend').innerText(), (t) => /p50 \d/.test(t))).toMatch(/p50 \d/);
  expect(await poll(() => page.locator('[data-chart="Inter-token latency"] .legend').innerText(), (t) => /p99 \d/.test(t))).toMatch(/p99 \d/);
  if (SCREENSHOTS && key !== null) {
    await page.emulateMedia({ colorScheme: "dark" });
    await Bun.sleep(2500);
    await page.screenshot({ path: join(import.meta.dir, "..", "..", "docs", "web-ui-metrics.png") });
  }
  expect(offsite).toEqual([]);
  await page.close();
}

test("web page with --api-key: chat streams, stops, regenerates with server timings; metrics move", async () => {
  await exercise(keyed, KEY);
}, 120_000);

test("web page without a key: the same, with browser-measured timings; phone width fits", async () => {
  await exercise(open, null);
  const phone = await browser.newPage({ viewport: { width: 375, height: 700 } });
  await phone.goto(open.url);
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);
  await phone.close();
}, 120_000);

test("web page on a prefill/decode pipeline: the metrics view shows one row per stage and the KV handed over", async () => {
  const pd = await startServer(["--pipeline", "pd"]);
  try {
    const page = await browser.newPage();
    await page.goto(`${pd.url}/#metrics`);
    await page.locator("#m-requests").waitFor();
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${pd.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: `Once upon a time ${i}`, max_tokens: 8 }) });
      expect(res.status).toBe(200);
    }
    const rows = page.locator("#stage-table tr");
    expect(await poll(() => rows.count(), (n) => n === 3)).toBe(3);
    // stage 1 (decode) got its prompts' KV from stage 0: the transfer column counts those tokens
    const transferred = async (): Promise<number> => Number(await rows.nth(2).locator("td").nth(6).innerText());
    expect(await poll(transferred, (n) => n > 0)).toBeGreaterThan(0);
    expect(await rows.nth(1).locator("td").nth(6).innerText()).toBe("0");
    // the view refreshes on a timer: under load its last scrape may predate the third request
    expect(await poll(async () => Number(await page.locator("#m-requests .v").innerText()), (n) => n === 3)).toBe(3);
    await page.close();
  } finally {
    await pd.stop();
  }
}, 120_000);

test("several models: the page offers a picker, and the chat goes to the model picked", async () => {
  const { copyFileSync, mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const dir = mkdtempSync(join(tmpdir(), "fennec-web-ui-models-"));
  for (const name of ["a", "b"]) copyFileSync(join(import.meta.dir, "..", "..", "build", "default-model.gguf"), join(dir, `${name}.gguf`));
  const server = await startServer([join(dir, "a.gguf"), join(dir, "b.gguf"), "--threads", "1"]);
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 800 } });
    const models: unknown[] = [];
    page.on("request", (r) => { if (r.url().endsWith("/v1/chat/completions")) models.push((JSON.parse(r.postData() ?? "{}") as { model?: unknown }).model); });
    await page.goto(server.url);
    await page.locator("#model-picker").waitFor();
    // the page itself came from the first model's app (so a may be loaded); b loads on its first chat
    expect(await page.locator("#model-picker option").evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).toEqual(["a", "b"]);
    expect(await page.locator("#model-picker option").last().innerText()).toBe("b · loads on first use");
    await page.locator("#model-picker").selectOption("b");
    await send(page, "Hello");
    expect(models).toEqual(["b"]);
    expect(await lastAnswer(page).innerText()).not.toBe("");
    const listed = await (await fetch(`${server.url}/v1/models`)).json() as { data: { id: string; loaded: boolean }[] };
    expect(listed.data.find((m) => m.id === "b")!.loaded).toBe(true);
    await page.close();
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
