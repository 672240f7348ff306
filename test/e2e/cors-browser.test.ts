/**
 * A browser app on another origin calls fennec: headless Chromium (Debian's, driven by playwright-core)
 * opens a page served from a second local server (another origin), which imports the `openai` SDK bundled for the
 * browser (Bun.build of the package's ESM entry, target browser) and streams a chat completion with an API key. The
 * SDK's own headers (x-stainless-*, Authorization) make Chromium send a CORS preflight first: fennec must allow them
 * (vLLM's default, all headers). With --allowed-origins naming another origin the same call must fail in the browser.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { startServer, type ServerProcess } from "./server-process.ts";

const CHROMIUM = "/usr/bin/chromium";
const KEY = "browser-key";
let browser: Browser;
let sdk: string;
const servers: ServerProcess[] = [];
const pages: ReturnType<typeof Bun.serve>[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/install-test-deps.sh (apt-get install chromium)`);
  const built = await Bun.build({ entrypoints: [join(import.meta.dir, "..", "..", "node_modules", "openai", "index.mjs")], target: "browser", format: "esm" });
  if (!built.success) throw new Error(`bundling the openai SDK for the browser failed: ${built.logs.join("\n")}`);
  sdk = await built.outputs[0]!.text();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const s of servers) await s.stop();
  for (const p of pages) p.stop(true);
});

/** The app's origin: http://localhost:<port>, while fennec is at http://127.0.0.1:<its port>. */
function pageOrigin(): string {
  const server = Bun.serve({
    hostname: "127.0.0.1", port: 0,
    fetch: (request) => {
      const path = new URL(request.url).pathname;
      if (path === "/openai.mjs") return new Response(sdk, { headers: { "content-type": "text/javascript" } });
      return new Response("<!doctype html><title>app</title><p>app</p>", { headers: { "content-type": "text/html" } });
    },
  });
  pages.push(server);
  return `http://localhost:${server.port}`;
}

/** Runs the SDK in the page: a streamed chat completion; resolves with the text or the error the SDK raised. */
async function streamFromPage(origin: string, apiBase: string): Promise<{ text?: string; chunks?: number; error?: string }> {
  const page = await browser.newPage();
  // Chromium's preflights do not show as page requests: the server's access log shows them
  await page.goto(`${origin}/`);
  const result = await page.evaluate(async ({ apiBase, key }) => {
    const { default: OpenAI } = await import("/openai.mjs" as string);
    const client = new OpenAI({ baseURL: apiBase, apiKey: key, dangerouslyAllowBrowser: true, maxRetries: 0 });
    try {
      const stream = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 12, stream: true, temperature: 0 });
      let text = "";
      let chunks = 0;
      for await (const chunk of stream) { chunks++; text += chunk.choices[0]?.delta?.content ?? ""; }
      return { text, chunks };
    } catch (e) {
      return { error: `${(e as Error).name}: ${(e as Error).message}` };
    }
  }, { apiBase, key: KEY });
  await page.close();
  return result;
}

describe("browser on another origin, openai SDK", () => {
  test("default CORS: the preflight passes and the stream arrives", async () => {
    const server = await startServer(["--api-key", KEY]);
    servers.push(server);
    const origin = pageOrigin();
    expect(new URL(origin).origin).not.toBe(new URL(server.url).origin);
    const result = await streamFromPage(origin, `${server.url}/v1`);
    expect(result.error).toBeUndefined();
    expect(result.chunks).toBeGreaterThan(2);
    expect(result.text!.length).toBeGreaterThan(0);
    // the SDK's headers made Chromium ask first, and fennec allowed them
    expect(server.log()).toMatch(/"OPTIONS \/v1\/chat\/completions HTTP\/1\.1" 200 OK/);
  }, 120_000);

  test("--allowed-origins naming another origin: the browser refuses the answer", async () => {
    const server = await startServer(["--api-key", KEY, "--allowed-origins", '["http://app.example"]']);
    servers.push(server);
    const result = await streamFromPage(pageOrigin(), `${server.url}/v1`);
    expect(result.text).toBeUndefined();
    expect(result.error).toMatch(/Connection error|Failed to fetch/);
    expect(server.log()).toMatch(/"OPTIONS \/v1\/chat\/completions HTTP\/1\.1" 400 Bad Request/);
  }, 120_000);
});
