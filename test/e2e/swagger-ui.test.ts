// Browser test: headless Chromium (Debian's `chromium`, driven by playwright-core) opens the real server's /docs and /redoc,
// authorizes with the API key, runs "Try it out" on POST /v1/chat/completions with the documented example, and sees
// a 200 with generated text. Needs no network: Swagger UI's files are embedded in fennec.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { startServer, type ServerProcess } from "./server-process.ts";

const CHROMIUM = "/usr/bin/chromium";
const KEY = "browser-key";
let server: ServerProcess;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/install-test-deps.sh (apt-get install chromium)`);
  [server, browser] = await Promise.all([
    startServer(["--api-key", KEY]),
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] }),
  ]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

test("Swagger UI: authorize, Try it out on chat completions, 200 with generated text", async () => {
  const page = await browser.newPage();
  const offsite: string[] = [];
  page.on("request", (r) => { if (!r.url().startsWith(server.url)) offsite.push(r.url()); });
  await page.goto(`${server.url}/docs`);

  // authorize with the bearer token
  await page.locator("button.authorize").first().click();
  await page.locator(".auth-container input").first().fill(KEY);
  await page.locator(".auth-btn-wrapper button.authorize").first().click();
  await page.locator(".auth-btn-wrapper button.btn-done").first().click();

  const operation = page.locator(".opblock-post").filter({ has: page.locator('[data-path="/v1/chat/completions"]') });
  await operation.locator(".opblock-summary").click();
  // the server turns "Try it out" on by default (tryItOutEnabled); a reader who has it off clicks it
  const tryOut = operation.locator("button.try-out__btn");
  if ((await tryOut.innerText()).trim() === "Try it out") await tryOut.click();
  const bodyEditor = operation.locator("textarea.body-param__text");
  expect(await bodyEditor.inputValue()).toContain("Once upon a time");
  await operation.locator("button.execute").click();

  const status = operation.locator(".live-responses-table .response .response-col_status").first();
  await status.waitFor({ timeout: 30_000 });
  expect((await status.innerText()).trim()).toBe("200");
  const responseText = await operation.locator(".live-responses-table .response-col_description .microlight").first().innerText();
  const body = JSON.parse(responseText) as { object: string; choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
  expect(body.object).toBe("chat.completion");
  expect(body.usage.completion_tokens).toBeGreaterThan(0);
  expect(body.choices[0]!.message.content.trim().length).toBeGreaterThan(0);
  expect(offsite).toEqual([]);
  await page.close();
}, 90_000);

test("ReDoc at /redoc (as vLLM's FastAPI serves it): renders the API document from the embedded bundle", async () => {
  const page = await browser.newPage();
  const offsite: string[] = [];
  page.on("request", (r) => { if (!r.url().startsWith(server.url)) offsite.push(r.url()); });
  await page.goto(`${server.url}/redoc`);
  // ReDoc renders each operation's summary into its menu once it has read /openapi.json
  await page.getByText("/v1/chat/completions").first().waitFor({ timeout: 30_000 });
  expect(await page.title()).toContain("ReDoc");
  expect(await page.locator("h1").first().innerText()).toContain("fennec API");
  // the bundle and the document are fennec's; ReDoc itself adds its search worker (a blob: URL) and its branding
  // image in the sidebar, which may fail offline without changing the page
  expect(offsite.filter((url) => !url.startsWith("blob:") && url !== "https://cdn.redoc.ly/redoc/logo-mini.svg")).toEqual([]);
  await page.close();
}, 90_000);
