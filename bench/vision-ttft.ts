/**
 * Time to first token with one image, server against server: fennec serve --mmproj beside llama.cpp's llama-server
 * --mmproj (scripts/build-llama-tool.sh llama-server) on the same Gemma 3 model and projector (bench/gemma3-vision-files.ts:
 * --layers of SigLIP's 27 at 896 px), the same threads. Each request is a chat completion with a new 640x480 PNG by
 * data URL (so neither side's image cache answers) and a short question, max_tokens 1, not streamed: its latency is
 * the image's encoding, the prompt's prefill and one token. The two servers are asked in turn, --rounds each; prints
 * each side's best and median and fennec's time as a ratio of llama-server's. Needs dist/fennec. Not a test.
 * Usage: bun run bench/vision-ttft.ts [--layers N] [--threads N] [--rounds N] [--llama-server PATH]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pattern, pngOf } from "../test/vision/test-images.ts";
import { writeGemma3VisionFiles } from "./gemma3-vision-files.ts";
import { llamaServerPath, startServer, type Server } from "./server-peers.ts";

const ROOT = join(import.meta.dir, "..");
const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : fallback;
};
const layers = Number(arg("layers", "4")), threads = Number(arg("threads", "2")), rounds = Number(arg("rounds", "3"));

interface Named extends Server { readonly name: string }

async function firstTokenMs(server: Named, seed: number): Promise<number> {
  const png = pngOf(640, 480, pattern(640, 480, seed));
  const body = {
    model: "lm", max_tokens: 1, temperature: 0,
    messages: [{ role: "user", content: [
      { type: "image_url", image_url: { url: `data:image/png;base64,${Buffer.from(png).toString("base64")}` } },
      { type: "text", text: "What is in this picture?" },
    ] }],
  };
  const t0 = performance.now();
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${server.name}: ${res.status} ${text.slice(0, 300)}`);
  return performance.now() - t0;
}

const stats = (xs: number[]): { best: number; median: number } => {
  const s = [...xs].sort((a, b) => a - b);
  return { best: s[0]!, median: s[Math.floor(s.length / 2)]! };
};

const dir = mkdtempSync(join(tmpdir(), "fennec-vision-ttft-"));
const servers: Named[] = [];
try {
  const { lmPath, mmPath } = writeGemma3VisionFiles(dir, layers);
  servers.push({ name: "fennec", ...await startServer([join(ROOT, "dist", "fennec"), "serve", lmPath, "--mmproj", mmPath, "--threads", String(threads), "--max-model-len", "2048", "--served-model-name", "lm"], join(dir, "fennec.log")) });
  servers.push({ name: "llama-server", ...await startServer([llamaServerPath(arg("llama-server", "")), "-m", lmPath, "--mmproj", mmPath, "-t", String(threads), "-tb", String(threads), "-c", "2048", "-np", "1", "--alias", "lm"], join(dir, "llama-server.log")) });
  for (const s of servers) await firstTokenMs(s, 1000); // warm-up: first-request costs (kernel compiles, graph allocation) aside
  const times = new Map<string, number[]>(servers.map((s) => [s.name, []]));
  for (let r = 0; r < rounds; r++) for (const s of servers) times.get(s.name)!.push(await firstTokenMs(s, r + 1));
  const [f, l] = [stats(times.get("fennec")!), stats(times.get("llama-server")!)];
  console.log(`Gemma 3 SigLIP ${layers} layers at 896 px + tiny Gemma 3, one 640x480 PNG, ${threads} threads, ${rounds} rounds each`);
  console.log(`fennec       time to first token: best ${f.best.toFixed(0)} ms, median ${f.median.toFixed(0)} ms`);
  console.log(`llama-server time to first token: best ${l.best.toFixed(0)} ms, median ${l.median.toFixed(0)} ms`);
  console.log(`fennec / llama-server: ${(f.best / l.best).toFixed(2)}x (best), ${(f.median / l.median).toFixed(2)}x (median) of llama-server's time`);
} finally {
  for (const s of servers) s.child.kill();
  rmSync(dir, { recursive: true, force: true });
}
