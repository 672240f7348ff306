/**
 * The linux-arm64 release binary (build.ts --target linux-arm64, Bun's cross-compile) run for real: under qemu-user
 * (Debian's qemu-user-static with the arm64 C and C++ runtimes, installed by scripts/install-test-deps.sh) on an x64
 * machine, natively on an arm64 one. It names its target, reproduces the 255 golden greedy ids of the default model
 * (the same check as test/golden for the host binary) and answers one request as a server.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { readGolden } from "../helpers/default-model-files.ts";
import { newestMtimeMs, startServer, type ServerProcess } from "./server-process.ts";

const ROOT = join(import.meta.dir, "..", "..");
const BINARY = join(ROOT, "dist", "fennec-linux-arm64");
const SYSROOT = "/usr/aarch64-linux-gnu";
const golden = readGolden();


/** qemu on x64, nothing on arm64; a missing qemu fails with the command that installs it. */
function runner(): string[] {
  if (process.arch === "arm64") return [];
  const qemu = Bun.which("qemu-aarch64-static");
  if (qemu === null || !existsSync(SYSROOT)) throw new Error("qemu-aarch64-static or /usr/aarch64-linux-gnu is missing: run scripts/install-test-deps.sh");
  return [qemu, "-L", SYSROOT];
}

// the release binary of the current sources: built here when missing or older than src/ (a second or two of compile)
if (!existsSync(BINARY) || statSync(BINARY).mtimeMs < newestMtimeMs(join(ROOT, "src"))) {
  const build = Bun.spawnSync([process.execPath, "run", join(ROOT, "build.ts"), "--target", "linux-arm64"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`build.ts --target linux-arm64 failed:\n${build.stdout.toString()}${build.stderr.toString()}`);
}

const servers: ServerProcess[] = [];
afterAll(async () => { for (const s of servers) await s.stop(); });

describe("linux-arm64 binary under qemu-user", () => {
  test("it is an aarch64 ELF and --version names linux-arm64 and the kernel build", () => {
    const header = readFileSync(BINARY).subarray(0, 20);
    expect([...header.subarray(0, 4)]).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    expect(header.readUInt16LE(18)).toBe(183); // e_machine EM_AARCH64
    const run = Bun.spawnSync([...runner(), BINARY, "--version"], { cwd: "/", stdout: "pipe", stderr: "pipe" });
    expect(run.exitCode).toBe(0);
    expect(run.stdout.toString()).toMatch(/^fennec \d+\.\d+\.\d+ \(linux-arm64, kernels (relaxed-simd|simd|scalar)\)\n$/);
  }, 60_000);

  test("greedy from BOS reproduces the 255 golden ids", () => {
    const run = Bun.spawnSync([...runner(), BINARY, "generate", "--prompt", "", "--max-tokens", "255", "--temperature", "0", "--json", "--threads", "1"], { cwd: "/", stdout: "pipe", stderr: "pipe", timeout: 90_000 });
    expect(run.stderr.toString()).toBe("");
    expect(run.exitCode).toBe(0);
    const out = JSON.parse(run.stdout.toString()) as { token_ids: number[]; text: string };
    expect(out.token_ids).toEqual(golden.greedyFromBos.ids);
    expect(out.text).toBe(golden.greedyFromBos.text);
  }, 120_000);

  test("serves one chat completion", async () => {
    const server = await startServer(["--threads", "1"], { command: [...runner(), BINARY, "serve"] });
    servers.push(server);
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 16, temperature: 0 });
    expect(answer.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(answer.usage!.completion_tokens).toBe(16);
    await Bun.sleep(300); // the access line is written once the response is out
    expect(server.log()).toMatch(/INFO \d{2}-\d{2} [\d:]{8} \[access\] 127\.0\.0\.1:\d+ - "POST \/v1\/chat\/completions HTTP\/1\.1" 200 OK/);
  }, 120_000);
});
