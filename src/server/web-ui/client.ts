/**
 * The web page's script (served at /ui/client.ts, transpiled to JavaScript by the server): a chat on the public
 * /v1/chat/completions stream (stop, regenerate, system prompt, sampling, per-answer timings) and a live metrics view
 * scraped from /metrics. It only uses the public API, with the API key typed into Settings when the server has one.
 */
import { bucketDelta, histogramBuckets, histogramQuantile, labelValues, parseExposition, sumOf, type Sample } from "./prometheus-text.ts";

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const KEY_STORE = "fennec.apiKey";
const THEME_STORE = "fennec.theme";

// ---------- theme and tabs ----------
const savedTheme = localStorage.getItem(THEME_STORE);
if (savedTheme) document.documentElement.dataset.theme = savedTheme;
$("theme").onclick = () => {
  const dark = document.documentElement.dataset.theme === "dark" || (!document.documentElement.dataset.theme && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = dark ? "light" : "dark";
  localStorage.setItem(THEME_STORE, document.documentElement.dataset.theme);
  drawMetrics();
};
function showView(view: "chat" | "metrics"): void {
  $("chat-view").hidden = view !== "chat";
  $("metrics-view").hidden = view !== "metrics";
  $("tab-chat").classList.toggle("on", view === "chat");
  $("tab-metrics").classList.toggle("on", view === "metrics");
  location.hash = view === "metrics" ? "#metrics" : "";
  if (view === "metrics") drawMetrics();
}
$("tab-chat").onclick = () => showView("chat");
$("tab-metrics").onclick = () => showView("metrics");

// ---------- API access ----------
const keyInput = $<HTMLInputElement>("api-key");
keyInput.value = localStorage.getItem(KEY_STORE) ?? "";
keyInput.onchange = () => {
  localStorage.setItem(KEY_STORE, keyInput.value.trim());
  void loadModel();
};
function headers(): Record<string, string> {
  const key = keyInput.value.trim();
  return key === "" ? { "content-type": "application/json" } : { "content-type": "application/json", authorization: `Bearer ${key}` };
}
/** The OpenAI error body's message, or the status line. */
async function errorText(res: Response): Promise<string> {
  const text = await res.text();
  let message = `${res.status} ${res.statusText}`;
  try {
    message = `${res.status}: ${(JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text}`;
  } catch { /* not JSON */ }
  if (res.status === 401) {
    ($("settings") as HTMLDetailsElement).open = true;
    message += " Enter the server's API key in Settings.";
  }
  return message;
}

let modelId: string | null = null;
async function loadModel(): Promise<void> {
  const res = await fetch("/v1/models", { headers: headers() });
  if (!res.ok) {
    $("model").textContent = await errorText(res);
    return;
  }
  const body = (await res.json()) as { data: { id: string; root?: string; max_model_len?: number | null; loaded?: boolean }[] };
  // one entry per model (the first of its names): a server of several models (`loaded` present) gets a picker
  const models = body.data.filter((m, i) => body.data.findIndex((o) => (o.root ?? o.id) === (m.root ?? m.id)) === i);
  modelId = models.some((m) => m.id === modelId) ? modelId : models[0]?.id ?? null;
  const label = (m: (typeof models)[number]): string =>
    `${m.id}${m.max_model_len ? ` · context ${m.max_model_len}` : ""}${m.loaded === false ? " · loads on first use" : ""}`;
  const holder = $("model");
  if (models.length < 2) {
    holder.textContent = modelId === null ? "no model" : label(models[0]!);
    return;
  }
  const select = document.createElement("select");
  select.id = "model-picker";
  for (const m of models) {
    const option = document.createElement("option");
    option.value = m.id;
    option.textContent = label(m);
    option.selected = m.id === modelId;
    select.append(option);
  }
  select.onchange = () => { modelId = select.value; };
  holder.replaceChildren(select);
}

// ---------- chat ----------
interface Turn { role: "user" | "assistant"; content: string }
const history: Turn[] = [];
let running: AbortController | null = null;

function el(tag: string, cls: string, text = ""): HTMLElement {
  const e = document.createElement(tag);
  e.className = cls;
  e.textContent = text;
  return e;
}

function addBubble(role: Turn["role"], text: string): { box: HTMLElement; body: HTMLElement; meta: HTMLElement } {
  const box = el("div", `msg ${role}`);
  const body = el("div", "text", text);
  const meta = el("div", "meta");
  box.append(body, meta);
  $("messages").append(box);
  box.scrollIntoView({ block: "end" });
  return { box, body, meta };
}

const num = (id: string): number | null => {
  const v = $<HTMLInputElement>(id).value.trim();
  return v === "" ? null : Number(v);
};

function requestBody(): Record<string, unknown> {
  const system = $<HTMLTextAreaElement>("system").value.trim();
  const messages = [...(system === "" ? [] : [{ role: "system", content: system }]), ...history];
  const body: Record<string, unknown> = { model: modelId ?? undefined, messages, stream: true, stream_options: { include_usage: true } };
  for (const [id, field] of [["temperature", "temperature"], ["top-p", "top_p"], ["top-k", "top_k"], ["max-tokens", "max_tokens"], ["seed", "seed"]] as const) {
    const v = num(id);
    if (v !== null) body[field] = v;
  }
  return body;
}

interface ServerTimings { time_to_first_token_ms: number | null; queue_time_ms: number | null; tokens_per_second: number | null; mean_itl_ms: number | null }

const fmt = (v: number | null | undefined, digits = 1): string => (v === null || v === undefined || !Number.isFinite(v) ? "n/a" : v.toFixed(digits));

function setBusy(busy: boolean): void {
  $("send").hidden = busy;
  $("stop").hidden = !busy;
}

/** Streams one answer to the current history into a new bubble. */
async function answer(): Promise<void> {
  const bubble = addBubble("assistant", "");
  bubble.box.dataset.state = "streaming";
  const controller = new AbortController();
  running = controller;
  setBusy(true);
  const sentMs = performance.now();
  let firstMs: number | null = null;
  let lastMs = sentMs;
  let chunks = 0;
  let text = "";
  let usage: { completion_tokens: number } | null = null;
  let server: ServerTimings | null = null;
  let state = "done";
  try {
    const res = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(requestBody()), signal: controller.signal });
    if (!res.ok || res.body === null) throw new Error(await errorText(res));
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += value;
      const events = buffer.split("\n\n");
      buffer = events.pop()!;
      for (const event of events) {
        const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data === "" || data === "[DONE]") continue;
        const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string } }[]; usage?: { completion_tokens: number }; metrics?: ServerTimings; error?: { message: string } };
        if (chunk.error) throw new Error(chunk.error.message);
        const piece = chunk.choices?.[0]?.delta?.content ?? "";
        if (piece !== "") {
          firstMs ??= performance.now();
          lastMs = performance.now();
          chunks++;
          text += piece;
          bubble.body.textContent = text;
        }
        if (chunk.usage) usage = chunk.usage;
        if (chunk.metrics) server = chunk.metrics;
      }
    }
  } catch (e) {
    if (controller.signal.aborted) state = "stopped";
    else {
      state = "error";
      bubble.box.classList.add("error");
      bubble.body.textContent = text === "" ? String(e instanceof Error ? e.message : e) : `${text}\n[${e instanceof Error ? e.message : e}]`;
    }
  }
  running = null;
  setBusy(false);
  bubble.box.dataset.state = state;
  if (state !== "error" || text !== "") history.push({ role: "assistant", content: text });
  const tokens = usage?.completion_tokens ?? chunks;
  const parts: string[] = [];
  if (server !== null) {
    parts.push(`TTFT ${fmt(server.time_to_first_token_ms)} ms`, `${fmt(server.tokens_per_second)} tok/s`, `queue ${fmt(server.queue_time_ms, 2)} ms`, `${tokens} tokens`, "(server's --enable-per-request-metrics)");
  } else if (firstMs !== null) {
    const decodeS = (lastMs - firstMs) / 1000;
    parts.push(`TTFT ${fmt(firstMs - sentMs)} ms`, `${tokens > 1 && decodeS > 0 ? fmt((tokens - 1) / decodeS) : "n/a"} tok/s`, "queue n/a", `${tokens} tokens`, "(measured in the browser; serve with --enable-per-request-metrics for the server's timings)");
  }
  if (state === "stopped") parts.unshift("stopped");
  bubble.meta.textContent = parts.join(" · ");
  const regen = el("button", "regen", "Regenerate");
  regen.onclick = () => {
    if (running !== null || bubble.box !== $("messages").lastElementChild) return;
    if (history[history.length - 1]?.role === "assistant") history.pop();
    bubble.box.remove();
    void answer();
  };
  document.querySelectorAll(".regen").forEach((b) => b.remove());
  bubble.meta.append(regen);
}

$("composer").onsubmit = (e) => {
  e.preventDefault();
  const input = $<HTMLTextAreaElement>("input");
  const text = input.value.trim();
  if (text === "" || running !== null) return;
  input.value = "";
  history.push({ role: "user", content: text });
  addBubble("user", text);
  void answer();
};
$("input").onkeydown = (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    ($("composer") as HTMLFormElement).requestSubmit();
  }
};
$("stop").onclick = () => running?.abort();

// ---------- metrics ----------
interface Scrape { t: number; samples: Sample[] }
const SCRAPE_MS = 2000;
const WINDOW_MS = 30_000;
const KEEP = 150; // 5 minutes
const scrapes: Scrape[] = [];

async function scrape(): Promise<void> {
  try {
    const res = await fetch("/metrics");
    if (res.ok) scrapes.push({ t: Date.now(), samples: parseExposition(await res.text()) });
    if (scrapes.length > KEEP) scrapes.shift();
  } catch { /* server restarting: try again next tick */ }
  if (!$("metrics-view").hidden) drawMetrics();
}

/** The scrape closest to `windowMs` before scrape i (the start of a rate window). */
function windowStart(i: number, windowMs: number): Scrape | null {
  const end = scrapes[i]!;
  let j = i - 1;
  while (j > 0 && end.t - scrapes[j - 1]!.t <= windowMs) j--;
  return j >= 0 && j < i ? scrapes[j]! : null;
}

function rate(i: number, name: string, where: Record<string, string> = {}, windowMs = SCRAPE_MS * 1.5): number | null {
  const a = windowStart(i, windowMs);
  if (a === null) return null;
  const b = scrapes[i]!;
  return Math.max(0, sumOf(b.samples, name, where) - sumOf(a.samples, name, where)) / ((b.t - a.t) / 1000);
}

function quantileAt(i: number, name: string, q: number): number | null {
  const a = windowStart(i, WINDOW_MS);
  if (a === null) return null;
  const v = histogramQuantile(q, bucketDelta(histogramBuckets(scrapes[i]!.samples, name), histogramBuckets(a.samples, name)));
  return v === null ? null : v * 1000;
}

function hitRate(i: number): number | null {
  const a = windowStart(i, WINDOW_MS);
  if (a === null) return null;
  const b = scrapes[i]!.samples;
  const queries = sumOf(b, "vllm:prefix_cache_queries_total") - sumOf(a.samples, "vllm:prefix_cache_queries_total");
  return queries > 0 ? (100 * (sumOf(b, "vllm:prefix_cache_hits_total") - sumOf(a.samples, "vllm:prefix_cache_hits_total"))) / queries : null;
}

interface Line { name: string; values: (number | null)[]; color: string }

function chart(title: string, unit: string, lines: Line[]): string {
  const W = 300, H = 120, L = 34, B = 14;
  const all = lines.flatMap((l) => l.values.filter((v): v is number => v !== null));
  const max = Math.max(all.length === 0 ? 1 : Math.max(...all) * 1.1, 1e-9);
  const n = Math.max(2, ...lines.map((l) => l.values.length));
  const x = (k: number): number => L + ((W - L - 4) * k) / (n - 1);
  const y = (v: number): number => H - B - ((H - B - 6) * v) / max;
  const label = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toPrecision(2));
  const polylines = lines.map((l) => {
    const pts = l.values.map((v, k) => (v === null ? null : `${x(k).toFixed(1)},${y(v).toFixed(1)}`)).filter((p) => p !== null);
    return `<polyline data-series="${l.name}" data-points="${pts.length}" style="stroke:${l.color}" points="${pts.join(" ")}"/>`;
  }).join("");
  const latest = (l: Line): string => {
    const v = [...l.values].reverse().find((u) => u !== null);
    return v === undefined || v === null ? "n/a" : label(v);
  };
  const legend = lines.map((l) => `<span><span style="color:${l.color}">&#9632;</span> ${l.name} ${latest(l)}</span>`).join("");
  return `<div class="card chart" data-chart="${title}"><div class="k">${title} (${unit})</div><svg viewBox="0 0 ${W} ${H}" preserveAspectRatio="none">` +
    `<line x1="${L}" y1="${y(0)}" x2="${W}" y2="${y(0)}"/><line x1="${L}" y1="${y(max / 1.1)}" x2="${W}" y2="${y(max / 1.1)}" stroke-dasharray="2 3"/>` +
    `<text x="2" y="${y(0) + 3}">0</text><text x="2" y="${y(max / 1.1) + 3}">${label(max / 1.1)}</text>${polylines}` +
    `<text x="${L}" y="${H - 2}">-${Math.round(((n - 1) * SCRAPE_MS) / 1000)} s</text><text x="${W - 20}" y="${H - 2}">now</text></svg><div class="legend">${legend}</div></div>`;
}

const css = (name: string): string => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

function drawMetrics(): void {
  if (scrapes.length === 0) return;
  const idx = scrapes.map((_, i) => i);
  const last = scrapes.length - 1;
  const now = scrapes[last]!.samples;
  const [c1, c2, c3, c4] = [css("--c1"), css("--c2"), css("--c3"), css("--c4")];
  const pct = (v: number | null): string => fmt(v, 1);
  const cards: [string, string, string][] = [
    ["requests", "requests finished", String(sumOf(now, "vllm:request_success_total"))],
    ["running", "running", String(sumOf(now, "vllm:num_requests_running"))],
    ["waiting", "waiting", String(sumOf(now, "vllm:num_requests_waiting"))],
    ["kv", "KV cache usage %", pct(100 * sumOf(now, "vllm:kv_cache_usage_perc") / Math.max(1, labelValues(now, "vllm:kv_cache_usage_perc", "engine").length))],
    ["hit", "prefix-cache hit rate % (30 s)", pct(hitRate(last))],
    ["gen", "generation tok/s", fmt(rate(last, "vllm:generation_tokens_total"))],
    ["ttft", "TTFT p50 ms (30 s)", fmt(quantileAt(last, "vllm:time_to_first_token_seconds", 0.5))],
    ["itl", "ITL p50 ms (30 s)", fmt(quantileAt(last, "vllm:inter_token_latency_seconds", 0.5))],
  ];
  $("cards").innerHTML = cards.map(([id, k, v]) => `<div class="card" id="m-${id}"><div class="v">${v}</div><div class="k">${k}</div></div>`).join("");
  const q = (name: string, p: number): (number | null)[] => idx.map((i) => quantileAt(i, name, p));
  const kvAvg = (i: number): number => 100 * sumOf(scrapes[i]!.samples, "vllm:kv_cache_usage_perc") / Math.max(1, labelValues(scrapes[i]!.samples, "vllm:kv_cache_usage_perc", "engine").length);
  $("charts").innerHTML = [
    chart("Request rate", "req/s", [{ name: "finished", values: idx.map((i) => rate(i, "vllm:request_success_total")), color: c1 }]),
    chart("Tokens", "tok/s", [
      { name: "generated", values: idx.map((i) => rate(i, "vllm:generation_tokens_total")), color: c1 },
      { name: "prompt", values: idx.map((i) => rate(i, "vllm:prompt_tokens_total")), color: c2 },
    ]),
    chart("Time to first token", "ms", [
      { name: "p50", values: q("vllm:time_to_first_token_seconds", 0.5), color: c3 },
      { name: "p90", values: q("vllm:time_to_first_token_seconds", 0.9), color: c2 },
      { name: "p99", values: q("vllm:time_to_first_token_seconds", 0.99), color: c1 },
    ]),
    chart("Inter-token latency", "ms", [
      { name: "p50", values: q("vllm:inter_token_latency_seconds", 0.5), color: c3 },
      { name: "p90", values: q("vllm:inter_token_latency_seconds", 0.9), color: c2 },
      { name: "p99", values: q("vllm:inter_token_latency_seconds", 0.99), color: c1 },
    ]),
    chart("Requests in the engine", "count", [
      { name: "running", values: idx.map((i) => sumOf(scrapes[i]!.samples, "vllm:num_requests_running")), color: c3 },
      { name: "waiting", values: idx.map((i) => sumOf(scrapes[i]!.samples, "vllm:num_requests_waiting")), color: c1 },
    ]),
    chart("KV cache and prefix cache", "%", [
      { name: "KV usage", values: idx.map(kvAvg), color: c4 },
      { name: "prefix hits", values: idx.map(hitRate), color: c2 },
    ]),
  ].join("");
  drawStages(now, last);
  drawEndpoints(now);
}

/** Every API dialect fennec speaks, by its routes (the handler label of http_requests_total); first match wins. */
const DIALECTS: readonly (readonly [RegExp, string])[] = [
  [/^\/v1\/responses/, "OpenAI Responses"], [/^\/v1\/messages/, "Anthropic Messages"], [/^\/api\//, "Ollama"], [/^\/(v1|v2)\/|^\/(tokenize|detokenize|pooling|classify|score|rerank|invocations)/, "OpenAI / vLLM"],
];

const dialectOf = (handler: string): string | null => DIALECTS.find(([re]) => re.test(handler))?.[1] ?? null;

/** One row per API route that was called, grouped by dialect: the HTTP series the server keeps for every dialect. */
function drawEndpoints(now: Sample[]): void {
  const handlers = labelValues(now, "http_requests_total", "handler").filter((h) => dialectOf(h) !== null);
  handlers.sort((a, b) => dialectOf(a)!.localeCompare(dialectOf(b)!) || a.localeCompare(b));
  if (handlers.length === 0) {
    $("endpoints").innerHTML = "";
    return;
  }
  const rows = handlers.map((h) => {
    const ok = sumOf(now, "http_requests_total", { handler: h, status: "2xx" });
    const all = sumOf(now, "http_requests_total", { handler: h });
    return `<tr data-handler="${h}"><td>${dialectOf(h)}</td><td><code>${h}</code></td><td>${ok}</td><td>${all - ok}</td></tr>`;
  }).join("");
  $("endpoints").innerHTML = `<h3>Requests by API</h3><table id="endpoint-table"><tr><th>dialect</th><th>route</th><th>answered (2xx)</th><th>refused or failed</th></tr>${rows}</table>`;
}

/** With a pipeline (several engines, vLLM-Omni stages): one row per stage, and the KV handed between them. */
function drawStages(now: Sample[], last: number): void {
  const engines = labelValues(now, "vllm:num_requests_running", "engine");
  if (engines.length < 2) {
    $("stages").innerHTML = "";
    return;
  }
  const rows = engines.map((e) => {
    const w = { engine: e };
    return `<tr><td>stage ${e}</td><td>${sumOf(now, "vllm:num_requests_running", w)}</td><td>${sumOf(now, "vllm:num_requests_waiting", w)}</td>` +
      `<td>${fmt(100 * sumOf(now, "vllm:kv_cache_usage_perc", w))}</td><td>${fmt(rate(last, "vllm:prompt_tokens_total", w))}</td><td>${fmt(rate(last, "vllm:generation_tokens_total", w))}</td>` +
      `<td>${sumOf(now, "vllm:prompt_tokens_by_source_total", { ...w, source: "external_kv_transfer" })}</td><td>${sumOf(now, "vllm:request_success_total", w)}</td></tr>`;
  }).join("");
  $("stages").innerHTML = `<h3>Pipeline stages</h3><table id="stage-table"><tr><th>stage (engine)</th><th>running</th><th>waiting</th><th>KV %</th><th>prompt tok/s</th><th>gen tok/s</th><th>prompt tokens via KV transfer</th><th>finished</th></tr>${rows}</table>`;
}

void loadModel();
void scrape();
setInterval(() => void scrape(), SCRAPE_MS);
if (location.hash === "#metrics") showView("metrics");
