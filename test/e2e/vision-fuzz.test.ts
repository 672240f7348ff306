/**
 * 200 fuzzed images against the compiled binary serving tiny Gemma 3 with its projector: truncated files of every
 * format, headers claiming huge or zero sizes, wrong magic bytes, decompression bombs (a small PNG whose header claims
 * 20000 x 20000) and empty bodies each get a 400 naming the problem, while /health stays responsive (p99 under
 * 50 ms); afterwards the server still answers an image, and its resident memory has not grown.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gemma3VocabPath } from "../../scripts/gemma3-vocab.ts";
import { MODEL_SHAPES, VISION_SHAPES } from "../../scripts/model-shapes.ts";
import { randomMmproj } from "../../scripts/random-mmproj.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { gifOf, jpegOf, pattern, pngOf, webpOf } from "../vision/test-images.ts";
import { startServer, type ServerProcess } from "./server-process.ts";

setDefaultTimeout(300_000);

const SHAPE = "tiny-gemma3-4b";
const dir = mkdtempSync(join(tmpdir(), "fennec-vision-fuzz-"));
const modelPath = join(dir, "tiny-gemma3.gguf");
const mmprojPath = join(dir, "projector.gguf");
let server: ServerProcess;

beforeAll(async () => {
  const vocab = readGguf(gemma3VocabPath());
  if (!vocab.ok) throw new Error(vocab.error);
  const shape = MODEL_SHAPES[SHAPE]!;
  writeGgufFile(modelPath, randomModel({ shapeName: SHAPE, shape, type: "q8_0", seed: 9, vocab: vocab.value }));
  writeGgufFile(mmprojPath, randomMmproj({ shapeName: SHAPE, vision: VISION_SHAPES[SHAPE]!, textDim: shape.dim, seed: 9 }));
  server = await startServer([modelPath, "--mmproj", mmprojPath, "--max-model-len", "256", "--kv-cache-memory", "16M"]);
}, 300_000);

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** mulberry32: a seeded PRNG, so a failing case can be replayed */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const setU32be = (b: Uint8Array, at: number, v: number) => new DataView(b.buffer, b.byteOffset).setUint32(at, v);
const setU16le = (b: Uint8Array, at: number, v: number) => new DataView(b.buffer, b.byteOffset).setUint16(at, v, true);
const setU16be = (b: Uint8Array, at: number, v: number) => new DataView(b.buffer, b.byteOffset).setUint16(at, v);

/** the byte offset of a JPEG's start-of-frame marker (FF C0 / C2) */
const sofAt = (b: Uint8Array): number => b.findIndex((x, i) => x === 0xff && (b[i + 1] === 0xc0 || b[i + 1] === 0xc2));

interface Case { readonly kind: string; readonly bytes: Uint8Array }

async function fuzzCases(count: number, seed: number): Promise<Case[]> {
  const random = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const rgb = pattern(48, 40, seed);
  const valid = { png: pngOf(48, 40, rgb), jpeg: jpegOf(48, 40, rgb), webp: await webpOf(48, 40, rgb), gif: gifOf(48, 40).bytes };
  const makers: Record<string, () => Uint8Array> = {
    truncated: () => {
      const src = pick(Object.values(valid));
      return src.slice(0, 1 + Math.floor(random() * src.length * 0.6));
    },
    huge: () => {
      const which = pick(["png", "jpeg", "gif", "webp"] as const);
      const b = valid[which].slice();
      if (which === "png") { setU32be(b, 16, 30_000 + Math.floor(random() * 1e6)); setU32be(b, 20, 30_000); }
      if (which === "gif") { setU16le(b, 6, 65_535); setU16le(b, 8, 65_000); }
      if (which === "jpeg") { const at = sofAt(b); setU16be(b, at + 5, 65_000); setU16be(b, at + 7, 65_535); }
      if (which === "webp") return webpVp8x(16_384, 16_384);
      return b;
    },
    zero: () => {
      const which = pick(["png", "gif"] as const);
      const b = valid[which].slice();
      if (which === "png") setU32be(b, 16 + 4 * Math.floor(random() * 2), 0);
      else setU16le(b, 6 + 2 * Math.floor(random() * 2), 0);
      return b;
    },
    magic: () => {
      const b = pick(Object.values(valid)).slice();
      for (let i = 0; i < 4; i++) b[i] = Math.floor(random() * 256);
      b[0] = 0x00; // never a real signature's first byte
      return b;
    },
    bomb: () => {
      // a real, tiny PNG whose header claims 20000 x 20000 (400 million pixels): refused before inflating anything
      const b = valid.png.slice();
      setU32be(b, 16, 20_000);
      setU32be(b, 20, 20_000);
      return b;
    },
    empty: () => new Uint8Array(0),
  };
  const kinds = Object.keys(makers);
  return Array.from({ length: count }, (_, i) => ({ kind: kinds[i % kinds.length]!, bytes: makers[kinds[i % kinds.length]!]!() }));
}

/** a VP8X WebP header claiming width x height */
function webpVp8x(width: number, height: number): Uint8Array {
  const b = new Uint8Array(40);
  b.set([..."RIFF"].map((c) => c.charCodeAt(0)), 0);
  b.set([..."WEBPVP8X"].map((c) => c.charCodeAt(0)), 8);
  b.set([10, 0, 0, 0], 16);
  const w = width - 1, h = height - 1;
  b.set([w & 0xff, (w >> 8) & 0xff, w >> 16, h & 0xff, (h >> 8) & 0xff, h >> 16], 24);
  return b;
}


async function send(bytes: Uint8Array): Promise<{ status: number; message: string }> {
  const body = { model: modelPath, max_tokens: 2, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${Buffer.from(bytes).toString("base64")}` } }, { type: "text", text: "hi" }] }] };
  const response = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const json = (await response.json()) as { error?: { message?: string } };
  return { status: response.status, message: json.error?.message ?? "" };
}

/** what each kind's message must say */
const NAMES: Record<string, RegExp> = {
  truncated: /(truncated|corrupt)/i,
  huge: /larger than the limit of 178956970 pixels/,
  zero: /is empty/,
  magic: /unsupported image format/,
  bomb: /20000x20000 = 400000000 pixels is larger than the limit/,
  empty: /the image is empty \(0 bytes\)/,
};

/**
 * Polls /health every few ms while `work` runs, from a separate process (this one builds the bodies and reads the
 * answers, which would delay its own polls and count against the server); the latencies in ms.
 */
async function healthLatenciesDuring(work: Promise<unknown>): Promise<number[]> {
  const script = `const out = []; let stop = false; process.stdin.on("data", () => { stop = true; });
    process.stdout.write("ready\\n");
    while (!stop || out.length < 20) { const t0 = performance.now(); const r = await fetch(${JSON.stringify(`${server.url}/health`)}); await r.arrayBuffer();
      out.push(r.status === 200 ? performance.now() - t0 : -1); await Bun.sleep(2); }
    process.stdout.write(JSON.stringify(out) + "\\n"); process.exit(0);`;
  const prober = Bun.spawn([process.execPath, "-e", script], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const reader = prober.stdout.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("ready\n")) text += decoder.decode((await reader.read()).value ?? new Uint8Array(), { stream: true });
  await work.catch(() => {});
  prober.stdin.write("stop\n");
  prober.stdin.end();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  await prober.exited;
  const latencies = JSON.parse(text.slice(text.indexOf("ready\n") + 6).trim()) as number[];
  expect(latencies.every((ms) => ms >= 0)).toBe(true);
  return latencies;
}

const p99 = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.99)]!;

async function residentBytes(): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return Number(/^process_resident_memory_bytes (\S+)$/m.exec(text)![1]);
}

describe("fuzzed images on the binary", () => {
  test("200 fuzzed images: each a 400 naming the problem, /health p99 under 50 ms meanwhile, RSS within 32 MiB, still serving", async () => {
    // warm-up: every decoder and the encoder thread loaded, one round of refusals
    for (const c of await fuzzCases(24, 1)) await send(c.bytes);
    // the machine's own noise (this VM's cores are shared): /health with nothing else going on
    const baseline = await healthLatenciesDuring(Bun.sleep(500));
    const rssBefore = await residentBytes();
    const cases = await fuzzCases(200, 2);
    const failures: string[] = [];
    // 2 at a time, while /health is polled
    const queue = cases.map((c, i) => ({ ...c, i }));
    const work = Promise.all(Array.from({ length: 2 }, async () => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        const r = await send(next.bytes);
        if (r.status !== 400 || !NAMES[next.kind]!.test(r.message)) failures.push(`case ${next.i} (${next.kind}, ${next.bytes.length} bytes): ${r.status} ${r.message}`);
      }
    }));
    const latencies = await healthLatenciesDuring(work);
    expect(failures).toEqual([]);
    console.log(`vision fuzz: /health p99 ${p99(latencies).toFixed(1)} ms (${latencies.length} samples) during 200 fuzzed images; idle baseline p99 ${p99(baseline).toFixed(1)} ms`);
    // the bound of hostile-http.test.ts: 50 ms over the idle server's own p99 on this machine, twice that for noise
    expect(p99(latencies)).toBeLessThan(50 + 2 * p99(baseline));
    const growth = await residentBytes() - rssBefore;
    console.log(`vision fuzz: server RSS ${(rssBefore / 2 ** 20).toFixed(0)} MiB before, ${growth >= 0 ? "+" : ""}${(growth / 2 ** 20).toFixed(1)} MiB after 200 fuzzed images`);
    expect(growth).toBeLessThan(32 * 2 ** 20);
    // a real image is still answered
    expect((await send(pngOf(30, 20, pattern(30, 20, 5)))).status).toBe(200);
  });
});
