/** `fennec generate` through the CLI entry: seeded sampling is reproducible, errors are one line with exit 2. */
import { describe, expect, test } from "bun:test";
import { writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureKernels } from "../kernels/ensure-kernels.ts";

// generate and the wasm runner need build/kernels-*.wasm; `bun test` does not run the build
await ensureKernels();

const ROOT = join(import.meta.dir, "..", "..");

function fennec(...args: string[]): { code: number; stdout: string; stderr: string } {
  const run = Bun.spawnSync([process.execPath, "run", join(ROOT, "src", "cli.ts"), "generate", ...args], { cwd: ROOT });
  return { code: run.exitCode, stdout: run.stdout.toString(), stderr: run.stderr.toString() };
}

describe("fennec generate", () => {
  test("a seed makes temperature sampling reproducible; another seed changes it; ids are only the generated ones", () => {
    const a = fennec("--prompt", "Once upon a time", "--max-tokens", "20", "--temperature", "1", "--seed", "7", "--json");
    const b = fennec("--prompt", "Once upon a time", "--max-tokens", "20", "--temperature", "1", "--seed", "7", "--json");
    const c = fennec("--prompt", "Once upon a time", "--max-tokens", "20", "--temperature", "1", "--seed", "8", "--json");
    expect(a.code).toBe(0);
    const [ja, jb, jc] = [a, b, c].map((r) => JSON.parse(r.stdout) as { token_ids: number[]; text: string });
    expect(ja!.token_ids.length).toBeLessThanOrEqual(20);
    expect(ja!.token_ids.length).toBeGreaterThan(0);
    expect(jb).toEqual(ja!);
    expect(jc!.token_ids).not.toEqual(ja!.token_ids);
  });

  test("text mode prints the prompt and its continuation", () => {
    const r = fennec("--prompt", "Once upon a time", "--max-tokens", "8", "--temperature", "0");
    expect(r.code).toBe(0);
    // the golden greedy text from BOS starts "Once upon a time, there was a little girl"
    expect(r.stdout).toStartWith("Once upon a time, there was a");
  });

  test("a missing model file: one line, exit 1 (the run failed, the flags were fine)", () => {
    const r = fennec("--model", "/nonexistent/model.gguf");
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("fennec: /nonexistent/model.gguf: file not found\n");
    expect(r.stdout).toBe("");
  });

  test("a file that is not GGUF: one line naming the file, exit 1", () => {
    const dir = mkdtempSync(join(tmpdir(), "fennec-generate-"));
    const path = join(dir, "bad.gguf");
    writeFileSync(path, "this is not a model");
    const r = fennec("--model", path);
    rmSync(dir, { recursive: true, force: true });
    expect(r.code).toBe(1);
    expect(r.stderr.split("\n").length).toBe(2);
    expect(r.stderr).toStartWith(`fennec: ${path}: `);
  });

  test("bad values: one line, exit 2", () => {
    const r = fennec("--max-tokens", "-3");
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("fennec: --max-tokens must be 0 or more (got -3)\n");
  });
});
