/**
 * Open WebUI (PyPI open-webui, the version scripts/install-open-webui.sh pins) on the real server process, driven in
 * headless Chromium as its users drive it: once with fennec as its Ollama server, once (a second Open WebUI) with
 * fennec as its OpenAI server. Each time the model picker lists fennec's model, a message is sent, and the answer fennec
 * streamed shows on the page. A recording pass-through between Open WebUI and fennec keeps what went by (the route,
 * `stream`, the records of the streamed answer); fennec's access log and --enable-log-requests lines show the same
 * requests arrived with the settings the page sent (max_tokens, seed). Open WebUI sends its built-in tools (memory,
 * notes, knowledge, ...) with every chat, as its default native function calling does, so the model has a template
 * with a tool format (Qwen2.5's: fennec picks hermes from it with no flags); a tool-less template gets Ollama's and
 * vLLM's 400 there. Skipped, saying so, when Open WebUI is not installed (CI installs it).
 * Screenshots go to $FENNEC_OPEN_WEBUI_SCREENSHOTS (default: a temporary folder; the paths are printed).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { llamaTemplatePath } from "../../scripts/llama-vocab.ts";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { freePort, startServer, type ServerProcess } from "./server-process.ts";

const ROOT = join(import.meta.dir, "..", "..");
const CHROMIUM = "/usr/bin/chromium";
const VERSION = /^VERSION=(\S+)$/m.exec(readFileSync(join(ROOT, "scripts", "install-open-webui.sh"), "utf8"))![1]!;
const HOME = process.env.OPEN_WEBUI_HOME ?? join(ROOT, ".cache", "open-webui", VERSION);
const OPEN_WEBUI = join(HOME, "venv", "bin", "open-webui");
const INSTALLED = existsSync(join(HOME, "installed")) && existsSync(OPEN_WEBUI);
const MODEL = "fennec-qwen";
/** Open WebUI's own start-up (migrations, config seeding) takes 30-60 s on two busy cores */
const START_TIMEOUT_MS = 240_000;
/** the built-in tools make a prompt of about 6,600 tokens: a first prefill of ~20 s here */
const ANSWER_TIMEOUT_MS = 120_000;
const SCREENSHOTS = process.env.FENNEC_OPEN_WEBUI_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), "fennec-open-webui-shots-"));
/** what the page's settings send with every chat (Open WebUI maps max_tokens to Ollama's num_predict) */
const PARAMS = { max_tokens: 16, seed: 7 };

/** One request that went from Open WebUI to fennec through the recording pass-through. */
interface Exchange {
  readonly method: string;
  readonly path: string;
  readonly body: Record<string, unknown> | null;
  status: number;
  contentType: string;
  /** the response body, once it ended */
  text: string | null;
}

interface OpenWebUi {
  readonly url: string;
  readonly process: ReturnType<typeof Bun.spawn>;
  readonly output: string[];
  readonly dataDir: string;
}

let fennec: ServerProcess;
let passThrough: ReturnType<typeof Bun.serve>;
const exchanges: Exchange[] = [];
let asOllama: OpenWebUi;
let asOpenAi: OpenWebUi;
let browser: Browser;

/** Forwards every request to fennec unchanged and records it (no idle timeout: a long prefill sends no bytes). */
function startPassThrough(target: string): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    hostname: "127.0.0.1", port: 0, idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const raw = request.method === "GET" || request.method === "HEAD" ? undefined : await request.text();
      let body: Record<string, unknown> | null = null;
      try {
        body = raw ? (JSON.parse(raw) as Record<string, unknown>) : null;
      } catch {
        // not JSON: recorded as null
      }
      const exchange: Exchange = { method: request.method, path: url.pathname, body, status: 0, contentType: "", text: null };
      exchanges.push(exchange);
      const headers = new Headers(request.headers);
      headers.delete("host");
      const upstream = await fetch(`${target}${url.pathname}${url.search}`, { method: request.method, headers, body: raw, signal: request.signal });
      exchange.status = upstream.status;
      exchange.contentType = upstream.headers.get("content-type") ?? "";
      if (upstream.body === null) {
        exchange.text = "";
        return new Response(null, { status: upstream.status, headers: { "content-type": exchange.contentType } });
      }
      const [toClient, toRecord] = upstream.body.tee();
      void new Response(toRecord).text().then((text) => { exchange.text = text; }, () => { exchange.text = ""; });
      return new Response(toClient, { status: upstream.status, headers: { "content-type": exchange.contentType } });
    },
  });
}

/** Starts `open-webui serve` in its slim mode, offline, single-user, with a fresh data folder; resolves once /health is 200. */
async function startOpenWebUi(connection: Record<string, string>): Promise<OpenWebUi> {
  const port = freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "fennec-open-webui-data-"));
  const output: string[] = [];
  const child = Bun.spawn([OPEN_WEBUI, "serve", "--host", "127.0.0.1", "--port", String(port)], {
    cwd: dataDir, stdin: "ignore", stdout: "pipe", stderr: "pipe",
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dataDir, DATA_DIR: dataDir,
      USE_SLIM_DOCKER: "true", WEBUI_AUTH: "False", WEBUI_SECRET_KEY: "fennec-open-webui-test",
      OFFLINE_MODE: "true", HF_HUB_OFFLINE: "1", RAG_EMBEDDING_MODEL_AUTO_UPDATE: "false", ENABLE_VERSION_UPDATE_CHECK: "false",
      ANONYMIZED_TELEMETRY: "false", DO_NOT_TRACK: "true", SCARF_NO_ANALYTICS: "true",
      // the one chat request is the test's: no title, tags or follow-up requests after it
      ENABLE_TITLE_GENERATION: "false", ENABLE_TAGS_GENERATION: "false", ENABLE_FOLLOW_UP_GENERATION: "false",
      ...connection,
    },
  });
  for (const stream of [child.stdout, child.stderr] as ReadableStream<Uint8Array>[]) {
    void (async () => {
      const reader = stream.getReader();
      const decoder = new TextDecoder();
      for (let read = await reader.read(); !read.done; read = await reader.read()) output.push(decoder.decode(read.value, { stream: true }));
    })();
  }
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`open-webui exited with ${child.exitCode}:\n${output.join("").slice(-4000)}`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) return { url, process: child, output, dataDir };
    } catch {
      // not listening yet
    }
    await Bun.sleep(500);
  }
  child.kill("SIGKILL");
  throw new Error(`open-webui not ready after ${START_TIMEOUT_MS} ms:\n${output.join("").slice(-4000)}`);
}

async function stopOpenWebUi(instance: OpenWebUi | undefined): Promise<void> {
  if (instance === undefined) return;
  if (instance.process.exitCode === null) {
    instance.process.kill("SIGTERM");
    const timer = setTimeout(() => instance.process.kill("SIGKILL"), 10_000);
    await instance.process.exited;
    clearTimeout(timer);
  }
  rmSync(instance.dataDir, { recursive: true, force: true });
}

/** The answer's text as the client received it: Ollama's NDJSON records or OpenAI's SSE chunks, and how many carried text. */
function streamedText(exchange: Exchange): { text: string; pieces: number } {
  let text = "";
  let pieces = 0;
  for (const line of (exchange.text ?? "").split("\n")) {
    const json = line.startsWith("data: ") ? line.slice(6) : line;
    if (json.trim() === "" || json === "[DONE]") continue;
    const record = JSON.parse(json) as { message?: { content?: string }; choices?: { delta?: { content?: string | null } }[] };
    const piece = record.message?.content ?? record.choices?.[0]?.delta?.content ?? "";
    if (piece !== "") pieces++;
    text += piece;
  }
  return { text, pieces };
}

const lettersAndDigits = (text: string): string => text.replace(/[^\p{L}\p{N}]/gu, "");

/**
 * One user's turn in Open WebUI: open it, set Max Tokens and Seed in the user's settings, see fennec's model in the
 * picker, send a message, see fennec's streamed answer on the page, save a screenshot. Returns the chat exchange.
 */
async function chatThroughOpenWebUi(instance: OpenWebUi, modelId: string, chatPath: string, shot: string): Promise<Exchange> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  try {
    await page.goto(instance.url);
    await page.locator("#chat-input").waitFor({ timeout: 60_000 });
    // the user's settings, as Settings > General > Advanced Parameters saves them (the version closes the changelog)
    const saved = await page.evaluate(async ([params, version]) => {
      const headers = { "content-type": "application/json", authorization: `Bearer ${localStorage.getItem("token")}` };
      const settings = (await (await fetch("/api/v1/users/user/settings", { headers })).json()) as { ui?: Record<string, unknown> } | null;
      const ui = { ...(settings?.ui ?? {}), version, params: { ...((settings?.ui?.params as object | undefined) ?? {}), ...params } };
      return (await fetch("/api/v1/users/user/settings/update", { method: "POST", headers, body: JSON.stringify({ ...(settings ?? {}), ui }) })).status;
    }, [PARAMS, VERSION] as const);
    expect(saved).toBe(200);
    await page.reload();
    await page.locator("#chat-input").waitFor({ timeout: 60_000 });

    // the model picker lists fennec's model, and it is the one selected
    await page.locator("#model-selector-model-button").click();
    const options = page.locator("#model-selector-list [role=option]");
    await options.first().waitFor();
    expect(await options.evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-value")))).toEqual([modelId]);
    await page.keyboard.press("Escape");
    expect(await page.locator("#model-selector-model-button").getAttribute("aria-label")).toBe(`Selected model: ${modelId}`);

    const before = exchanges.length;
    await page.locator("#chat-input").click();
    await page.keyboard.type("Tell me a story about a fox.");
    await page.keyboard.press("Enter");

    // fennec's answer ends, then the page shows it
    const deadline = Date.now() + ANSWER_TIMEOUT_MS;
    let chat: Exchange | undefined;
    while (Date.now() < deadline && (chat === undefined || chat.text === null)) {
      await Bun.sleep(250);
      chat = exchanges.slice(before).find((e) => e.method === "POST" && e.path === chatPath);
    }
    expect(chat?.text ?? null, `no finished ${chatPath} request within ${ANSWER_TIMEOUT_MS} ms; Open WebUI said:\n${instance.output.join("").slice(-3000)}`).not.toBeNull();
    const { text, pieces } = streamedText(chat!);
    // compared on letters and digits: the page renders the answer as Markdown, which drops or restyles the symbols
    const want = lettersAndDigits(text).slice(0, 12);
    expect(want.length).toBeGreaterThan(0);
    await page.waitForFunction(
      (w) => (document.querySelector("#messages-container")?.textContent ?? "").replace(/[^\p{L}\p{N}]/gu, "").includes(w),
      want, { timeout: 30_000 },
    );
    await page.screenshot({ path: shot });
    console.log(`open-webui: screenshot ${shot}`);
    expect(pieces).toBeGreaterThan(1);
    return chat!;
  } finally {
    await page.close();
  }
}

describe.skipIf(!INSTALLED)(`Open WebUI ${VERSION}${INSTALLED ? "" : ` (skipped: not installed in ${HOME}; run scripts/install-open-webui.sh)`}`, () => {
  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/install-test-deps.sh (apt-get install chromium)`);
    mkdirSync(SCREENSHOTS, { recursive: true });
    // random weights in Qwen2.5-0.5B's tokenizer, one small layer, a context that holds Open WebUI's tool prompt
    const model = await makeModelFile("tiny-qwen2.5-0.5b", "q8_0", 1, ["--context", "32768"]);
    fennec = await startServer(["--model", model, "--served-model-name", MODEL, "--max-model-len", "16384",
      "--chat-template", llamaTemplatePath("Qwen-Qwen2.5-7B-Instruct"), "--enable-log-requests", "--max-log-len", "80"]);
    passThrough = startPassThrough(fennec.url);
    const through = `http://127.0.0.1:${passThrough.port}`;
    [asOllama, asOpenAi, browser] = await Promise.all([
      startOpenWebUi({ ENABLE_OLLAMA_API: "true", OLLAMA_BASE_URL: through, ENABLE_OPENAI_API: "false" }),
      startOpenWebUi({ ENABLE_OLLAMA_API: "false", ENABLE_OPENAI_API: "true", OPENAI_API_BASE_URL: `${through}/v1`, OPENAI_API_KEY: "none" }),
      chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] }),
    ]);
  }, START_TIMEOUT_MS + 60_000);

  afterAll(async () => {
    await browser?.close();
    await Promise.all([stopOpenWebUi(asOllama), stopOpenWebUi(asOpenAi)]);
    passThrough?.stop(true);
    await fennec?.stop();
  });

  test("as its Ollama server: the picker lists fennec's model from /api/tags, a chat streams NDJSON from /api/chat", async () => {
    const chat = await chatThroughOpenWebUi(asOllama, `${MODEL}:latest`, "/api/chat", join(SCREENSHOTS, "open-webui-ollama.png"));
    expect(exchanges.some((e) => e.path === "/api/tags" && e.status === 200)).toBe(true);
    expect(chat.status).toBe(200);
    expect(chat.contentType).toStartWith("application/x-ndjson");
    expect(chat.body).toMatchObject({ model: `${MODEL}:latest`, stream: true, options: { num_predict: PARAMS.max_tokens, seed: PARAMS.seed } });
    expect((chat.body!.tools as unknown[]).length).toBeGreaterThan(0);
    expect(fennec.log()).toContain(`"POST /api/chat HTTP/1.1" 200`);
    expect(fennec.log()).toMatch(new RegExp(`Received request .*max_tokens=${PARAMS.max_tokens}.*seed=${PARAMS.seed}|Received request .*seed=${PARAMS.seed}.*max_tokens=${PARAMS.max_tokens}`));
  }, ANSWER_TIMEOUT_MS + 120_000);

  test("as its OpenAI server: the picker lists fennec's model from /v1/models, a chat streams SSE from /v1/chat/completions", async () => {
    const chat = await chatThroughOpenWebUi(asOpenAi, MODEL, "/v1/chat/completions", join(SCREENSHOTS, "open-webui-openai.png"));
    expect(exchanges.some((e) => e.path === "/v1/models" && e.status === 200)).toBe(true);
    expect(chat.status).toBe(200);
    expect(chat.contentType).toStartWith("text/event-stream");
    expect(chat.body).toMatchObject({ model: MODEL, stream: true, max_tokens: PARAMS.max_tokens, seed: PARAMS.seed });
    expect(chat.text!.trimEnd()).toEndWith("data: [DONE]");
    expect(fennec.log()).toContain(`"POST /v1/chat/completions HTTP/1.1" 200`);
  }, ANSWER_TIMEOUT_MS + 120_000);

  test("fennec took every request both Open WebUIs sent (no field refused)", () => {
    expect(exchanges.length).toBeGreaterThan(0);
    expect(exchanges.filter((e) => e.status < 200 || e.status >= 300).map((e) => `${e.method} ${e.path} ${e.status}: ${e.text}`)).toEqual([]);
  });
});
