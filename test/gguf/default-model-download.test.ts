/**
 * The build's download path for the default model's two inputs, against a local stand-in for the Hub (HF_ENDPOINT,
 * as huggingface_hub reads it): with no shared folder the build says it downloads, fetches the pinned path, checks
 * the sha256, caches both files and converts the same GGUF as the build; a second run uses the cache; a wrong or
 * missing file fails with one line and leaves nothing behind.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { DEFAULT_MODEL_FILES, upstreamUrl } from "../../src/gguf/default-model-build.ts";
import { defaultModelPath } from "../../src/gguf/default-model.ts";
import { ROOT, defaultModelInput } from "../helpers/default-model-files.ts";

setDefaultTimeout(60_000);

const dir = mkdtempSync(join(tmpdir(), "fennec-download-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in Hub serving `files` by name; records each request's path. */
function standIn(files: Record<string, Uint8Array<ArrayBuffer>>): { base: string; paths: string[]; stop: () => void } {
  const paths: string[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const path = new URL(req.url).pathname;
      paths.push(path);
      const body = files[basename(path)];
      return body === undefined ? new Response("not found", { status: 404 }) : new Response(body);
    },
  });
  return { base: `http://127.0.0.1:${server.port}`, paths, stop: () => server.stop(true) };
}

/** `bun run src/gguf/default-model-build.ts <absent shared folder> <out>` against the stand-in. */
async function build(base: string, out: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, "run", join(ROOT, "src", "gguf", "default-model-build.ts"), join(dir, "no-shared-models"), out], {
    cwd: ROOT,
    env: { ...process.env, HF_ENDPOINT: base, NO_PROXY: "127.0.0.1", no_proxy: "127.0.0.1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

const real = Object.fromEntries(DEFAULT_MODEL_FILES.map((f) => [f.name, new Uint8Array(readFileSync(defaultModelInput(f.name)))]));
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("default model inputs downloaded from a stand-in Hub", () => {
  test("says it downloads, fetches the pinned paths, checks and caches both files, converts the build's GGUF; a rerun uses the cache", async () => {
    const hub = standIn(real);
    try {
      const out = join(dir, "ok", "build", "default-model.gguf");
      const first = await build(hub.base, out);
      expect(first.stderr).toBe("");
      expect(first.code).toBe(0);
      for (const f of DEFAULT_MODEL_FILES) {
        const url = upstreamUrl(f.name, { HF_ENDPOINT: hub.base });
        expect(first.stdout).toContain(`${join(dir, "no-shared-models", f.name)} is absent: downloading ${url}\n`);
        expect(hub.paths).toContain(new URL(url).pathname);
        const cached = new Uint8Array(readFileSync(join(dir, "ok", ".cache", "models", f.name)));
        expect([cached.length, sha256(cached)]).toEqual([f.bytes, f.sha256]);
      }
      expect(new URL(upstreamUrl("x", { HF_ENDPOINT: hub.base })).pathname).toBe("/karpathy/tinyllamas/resolve/0bd21da7698eaf29a0d7de3992de8a46ef624add/stories260K/x");
      expect(Buffer.compare(readFileSync(out), readFileSync(defaultModelPath()))).toBe(0);
      const requests = hub.paths.length;
      const second = await build(hub.base, out);
      expect(second.code).toBe(0);
      expect(second.stdout).not.toContain("downloading");
      expect(hub.paths.length).toBe(requests);
    } finally {
      hub.stop();
    }
  });

  test("a file with the wrong bytes fails with its hash and is not cached", async () => {
    const tampered = real["stories260K.bin"]!.slice();
    tampered[100]! ^= 1;
    const hub = standIn({ ...real, "stories260K.bin": tampered });
    try {
      const out = join(dir, "bad", "build", "default-model.gguf");
      const r = await build(hub.base, out);
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`default model: ${upstreamUrl("stories260K.bin", { HF_ENDPOINT: hub.base })} has sha256 ${sha256(tampered)}, expected ${DEFAULT_MODEL_FILES[0].sha256}`);
      expect(existsSync(join(dir, "bad", ".cache", "models", "stories260K.bin"))).toBe(false);
      expect(existsSync(out)).toBe(false);
    } finally {
      hub.stop();
    }
  });

  test("a missing file fails with the HTTP status", async () => {
    const hub = standIn({ "stories260K.bin": real["stories260K.bin"]! });
    try {
      const r = await build(hub.base, join(dir, "missing", "build", "default-model.gguf"));
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(`default model: download of ${upstreamUrl("tok512.bin", { HF_ENDPOINT: hub.base })} failed: HTTP 404`);
    } finally {
      hub.stop();
    }
  });
});
