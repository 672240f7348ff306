/**
 * `fennec tokenize` end to end, as a subprocess of `bun src/cli.ts` (stdout, stderr and the exit code are the contract).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mdString } from "../../src/gguf/metadata.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { readGolden } from "./helpers.ts";

const CLI = new URL("../../src/cli.ts", import.meta.url).pathname;
/** each case starts a Bun process; on a busy 2-core CI box that can take seconds */
const SUBPROCESS_TIMEOUT_MS = 30_000;

function fennec(...args: string[]): { code: number; stdout: string; stderr: string } {
  const run = Bun.spawnSync([process.execPath, CLI, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: run.exitCode ?? -1, stdout: run.stdout.toString(), stderr: run.stderr.toString() };
}

describe("fennec tokenize", () => {
  const spm = llamaVocabPath("llama-spm");

  test("--json prints the ids, no BOS by default", () => {
    const r = fennec("tokenize", "--text", "Hello world", "--json", "--model", spm);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ token_ids: [15043, 3186] }); // llama.cpp's own vector
  }, SUBPROCESS_TIMEOUT_MS);

  test("--add-special adds BOS and parses special texts", () => {
    const r = fennec("tokenize", "--text", "Hello world</s>", "--json", "--add-special", "--model", spm);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ token_ids: [1, 15043, 3186, 2] });
  }, SUBPROCESS_TIMEOUT_MS);

  test("plain output is one line of space-separated ids", () => {
    const r = fennec("tokenize", "--text", "Hello world", "--model", spm);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("15043 3186\n");
  }, SUBPROCESS_TIMEOUT_MS);

  test("default model: the embedded stories260K", () => {
    const golden = readGolden().tokenize[0]!;
    const r = fennec("tokenize", "--text", golden.text, "--json");
    expect(r.stderr).toBe("");
    expect(JSON.parse(r.stdout)).toEqual({ token_ids: golden.ids });
  }, SUBPROCESS_TIMEOUT_MS);

  test.each([
    ["missing --text", ["tokenize", "--json"], "--text", 2],
    ["missing model file", ["tokenize", "--text", "hi", "--model", "/nonexistent/model.gguf"], "/nonexistent/model.gguf", 1],
    ["a file that is not GGUF", ["tokenize", "--text", "hi", "--model", CLI], CLI, 1],
  ] as const)("%s: one-line error, exit %i (2 usage, 1 failed run)", (_name, args, mention, code) => {
    const r = fennec(...args);
    expect(r.code).toBe(code);
    expect(r.stdout).toBe("");
    expect(r.stderr.trimEnd().split("\n").length).toBe(1);
    expect(r.stderr).toStartWith("fennec: ");
    expect(r.stderr).toContain(mention);
  }, SUBPROCESS_TIMEOUT_MS);

  test("a GGUF without tokenizer metadata: one-line error naming the key", () => {
    const dir = mkdtempSync(join(tmpdir(), "fennec-tokenize-"));
    const path = join(dir, "no-tokenizer.gguf");
    try {
      writeGgufFile(path, { metadata: new Map([["general.architecture", mdString("llama")]]), tensors: [] });
      const r = fennec("tokenize", "--text", "hi", "--model", path);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`fennec: ${path}: tokenizer.ggml.model: missing (the file has no tokenizer)\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, SUBPROCESS_TIMEOUT_MS);
});
