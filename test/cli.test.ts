/**
 * The CLI contract, table-driven, on the real entry point as a subprocess: every command's --help names every flag,
 * and bad input is ONE line on stderr, never a stack trace, for every command: exit 2 for a usage error (unknown flags,
 * bad values), exit 1 for a run that fails (missing or non-GGUF model files), as vLLM's argparse and Python do.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { COMMANDS, flagsOf, POSITIONAL_MODEL, type Command } from "../src/command-line/flags.ts";

const CLI = join(import.meta.dir, "..", "src", "cli.ts");
const dir = mkdtempSync(join(tmpdir(), "fennec-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NOT_GGUF = join(dir, "not-a-model.gguf");
writeFileSync(NOT_GGUF, "this is not a model file\n");
const BATCH_IN = join(dir, "in.jsonl");
writeFileSync(BATCH_IN, `${JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { model: "m", prompt: "hi", max_tokens: 1 } })}\n`);
const BATCH_OUT = join(dir, "out.jsonl");

function fennec(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const run = Bun.spawnSync([process.execPath, CLI, ...args], { stdout: "pipe", stderr: "pipe", stdin: "ignore", timeout: 60_000 });
  return { code: run.exitCode, stdout: run.stdout.toString(), stderr: run.stderr.toString() };
}

/** What each command needs besides the flag under test, so the failure is the flag's and nothing else's. */
const BASE: Readonly<Record<Command, readonly string[]>> = {
  generate: ["--max-tokens", "1"],
  tokenize: ["--text", "hi"],
  serve: ["--host", "127.0.0.1", "--port", "0", "--threads", "1"],
  "run-batch": ["-i", BATCH_IN, "-o", BATCH_OUT, "--threads", "1"],
  chat: ["--url", "http://127.0.0.1:9/v1"],
  "bench serve": ["--base-url", "http://127.0.0.1:9", "--num-prompts", "1"],
  "bench throughput": ["--num-prompts", "1", "--random-input-len", "4", "--random-output-len", "1", "--threads", "1"],
  "bench latency": ["--batch-size", "1", "--input-len", "4", "--output-len", "1", "--num-iters-warmup", "0", "--num-iters", "1", "--threads", "1"],
  // a leading flag: inspect's first bare word would be its model
  inspect: ["--json"],
  // servers nothing listens on: every case below fails before the proxy would listen
  proxy: ["--prefill", "http://127.0.0.1:9", "--decode", "http://127.0.0.1:9", "--port", "0"],
  pull: [],
};

interface BadCase {
  readonly name: string;
  readonly commands: readonly Command[];
  readonly args: readonly string[];
  /** a part of the one line the user must see */
  readonly says: string;
  /** the exit code: 2 (usage) unless the flags were fine and the run failed (1) */
  readonly code?: 1 | 2;
}

const ALL = Object.keys(COMMANDS) as Command[];
/** commands whose --model is a GGUF file (bench serve's is a served model's name) */
const FILE_COMMANDS = ALL.filter((c) => c !== "bench serve" && c !== "chat" && c !== "proxy" && c !== "pull");
const MODEL_COMMANDS: readonly Command[] = ["generate", "serve", "run-batch", "chat", "bench throughput", "bench latency"];

const BAD: readonly BadCase[] = [
  { name: "an unknown flag", commands: ALL, args: ["--bogus"], says: "unknown option --bogus" },
  { name: "a stray argument", commands: ["generate", "tokenize", "run-batch", "chat", "bench serve", "bench throughput", "bench latency", "proxy"], args: ["stray"], says: 'unexpected argument "stray"' },
  // serve takes one positional model, as `vllm serve MODEL`: a second one is stray
  { name: "a second positional argument", commands: ["inspect"], args: ["model.gguf", "stray"], says: 'unexpected argument "stray"' },
  // serve takes several models (loaded on demand); each local one must exist at start-up
  { name: "a second positional model that is missing", commands: ["serve"], args: [NOT_GGUF, "stray.gguf"], says: "stray.gguf: file not found", code: 1 },
  { name: "the model given twice", commands: ["serve"], args: ["a.gguf", "--model", "b.gguf"], says: "the model is given twice" },
  { name: "a positional model that is missing", commands: ["serve"], args: ["/nonexistent/positional.gguf"], says: "/nonexistent/positional.gguf: file not found", code: 1 },
  { name: "a flag without its value", commands: ALL.filter((c) => c !== "proxy"), args: ["--model"], says: "--model needs a value" },
  { name: "a list flag without its value", commands: ["proxy"], args: ["--decode"], says: "--decode needs a value" },
  { name: "--upstream-timeout 0", commands: ["proxy"], args: ["--upstream-timeout", "0"], says: "--upstream-timeout must be a positive integer (got 0)" },
  { name: "a missing model file", commands: FILE_COMMANDS, args: ["--model", "/nonexistent/model.gguf"], says: "/nonexistent/model.gguf: file not found", code: 1 },
  { name: "a model that is a folder", commands: FILE_COMMANDS.filter((c) => c !== "serve"), args: ["--model", "/"], says: "/: not a regular file", code: 1 },
  // serve takes a folder as its model files
  { name: "a folder with no model file", commands: ["serve"], args: ["--model", "/"], says: "/: a folder with no .gguf model file in it" },
  { name: "a file that is not GGUF", commands: FILE_COMMANDS, args: ["--model", NOT_GGUF], says: `${NOT_GGUF}: not a GGUF file`, code: 1 },
  { name: "--threads 0", commands: MODEL_COMMANDS, args: ["--threads", "0"], says: "--threads must be in 1..256 (got 0)" },
  { name: "--threads 1000", commands: MODEL_COMMANDS, args: ["--threads", "1000"], says: "--threads must be in 1..256 (got 1000)" },
  { name: "--threads two", commands: MODEL_COMMANDS, args: ["--threads", "two"], says: '--threads needs an integer (got "two")' },
  { name: "an unknown --device", commands: MODEL_COMMANDS, args: ["--device", "tpu"], says: "--device must be one of cpu, webgpu" },
  { name: "--max-tokens -1", commands: ["generate"], args: ["--max-tokens", "-1"], says: "--max-tokens must be 0 or more (got -1)" },
  { name: "--max-tokens 1.5", commands: ["generate"], args: ["--max-tokens", "1.5"], says: '--max-tokens needs an integer (got "1.5")' },
  { name: "--temperature abc", commands: ["generate"], args: ["--temperature", "abc"], says: '--temperature needs a number (got "abc")' },
  { name: "--temperature -1", commands: ["generate"], args: ["--temperature", "-1"], says: "--temperature must be 0 or more (got -1)" },
  { name: "--seed with an empty value", commands: ["generate"], args: ["--seed="], says: '--seed needs an integer (got "")' },
  { name: "a flag of another command", commands: ["generate"], args: ["--block-size", "16"], says: "unknown option --block-size for 'generate'" },
  { name: "--json=maybe", commands: ["generate", "tokenize"], args: ["--json=maybe"], says: '--json takes no value or true/false (got "maybe")' },
  { name: "--max-num-seqs 0", commands: ["serve", "run-batch"], args: ["--max-num-seqs", "0"], says: "--max-num-seqs must be a positive integer (got 0)" },
  { name: "--block-size -16", commands: ["serve", "run-batch"], args: ["--block-size", "-16"], says: "--block-size must be a positive integer (got -16)" },
  { name: "--kv-cache-memory 0", commands: ["serve", "run-batch"], args: ["--kv-cache-memory", "0"], says: "--kv-cache-memory must be a positive integer (got 0)" },
  { name: "an unknown --pipeline", commands: ["serve", "run-batch"], args: ["--pipeline", "zigzag"], says: "--pipeline must be one of single, pd" },
  { name: "--port 70000", commands: ["serve", "proxy"], args: ["--port", "70000"], says: "--port must be in 0..65535 (got 70000)" },
];

/** Cases with their own argv (no BASE): a missing required flag, a missing input file, an unknown command. */
const BAD_RAW: readonly { name: string; args: readonly string[]; says: string; code?: 1 }[] = [
  { name: "tokenize without --text", args: ["tokenize"], says: "tokenize needs --text" },
  { name: "run-batch without -i", args: ["run-batch", "-o", BATCH_OUT], says: "run-batch needs -i/--input-file" },
  { name: "run-batch without -o", args: ["run-batch", "-i", BATCH_IN], says: "run-batch needs -o/--output-file" },
  { name: "run-batch with a missing input file", args: ["run-batch", "-i", join(dir, "missing.jsonl"), "-o", BATCH_OUT], says: "missing.jsonl" },
  { name: "an unknown command", args: ["frobnicate"], says: 'unknown command "frobnicate"' },
  { name: "an unknown command lists version too", args: ["frobnicate"], says: ", pull, version; see fennec --help" },
  { name: "version with an argument", args: ["version", "extra"], says: 'version takes no arguments (got "extra"' },
  { name: "a hidden-state speculative method names every method that runs", args: ["serve", "--speculative-config", '{"method": "eagle", "model": "d.gguf", "num_speculative_tokens": 2}', "--port", "0"], says: "use 'ngram', 'suffix' or 'draft_model'" },
  { name: "bench without what to measure", args: ["bench"], says: "fennec bench serve|throughput|latency" },
  { name: "bench serve with --request-rate 0", args: ["bench", "serve", "--request-rate", "0"], says: "--request-rate must be a positive number or inf" },
  { name: "bench serve with an unknown percentile metric", args: ["bench", "serve", "--percentile-metrics", "ttft,speed"], says: 'unknown metric "speed"' },
  { name: "bench serve against nothing", args: ["bench", "serve", "--base-url", "http://127.0.0.1:9", "--num-prompts", "1"], says: "cannot read http://127.0.0.1:9/v1/models", code: 1 },
  { name: "chat without a server", args: ["chat", "--url", "http://127.0.0.1:9/v1"], says: "cannot read http://127.0.0.1:9/v1/models", code: 1 },
  { name: "chat on a missing model file", args: ["chat", "--model", "/nonexistent/chat.gguf"], says: "/nonexistent/chat.gguf: file not found", code: 1 },
  { name: "inspect with two models", args: ["inspect", "a.gguf", "b.gguf"], says: 'unexpected argument "b.gguf"' },
  { name: "proxy without --prefill", args: ["proxy", "--decode", "http://127.0.0.1:9"], says: "proxy needs --prefill <url>..." },
  { name: "proxy without --decode", args: ["proxy", "--prefill", "127.0.0.1:9"], says: "proxy needs --decode <url>..." },
  { name: "proxy with a server that is not http", args: ["proxy", "--prefill", "ftp://127.0.0.1:9", "--decode", "127.0.0.1:9"], says: 'only http:// and https:// servers can be proxied' },
  { name: "proxy with a server that is no address", args: ["proxy", "--prefill", "127.0.0.1:9", "--decode", "http://[::1"], says: 'is not a server address' },
];

function expectOneLineError(r: ReturnType<typeof fennec>, says: string, code: 1 | 2 = 2): void {
  expect({ code: r.code, stderr: r.stderr }).toMatchObject({ code });
  expect(r.stderr.endsWith("\n")).toBe(true);
  expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(r.stderr).toStartWith("fennec: ");
  expect(r.stderr).toContain(says);
  expect(r.stderr).not.toMatch(/\n\s+at |\^\n|error: /);
  expect(r.stdout).toBe("");
}

describe("the flags table", () => {
  // a flag named twice for one command would let one row's fate hide the other's (an implemented flag shown as refused)
  test.each(Object.keys(COMMANDS) as Command[])("%s: every flag is one row", (command) => {
    const names = flagsOf(command).map((f) => f.name);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
  });
});

describe("fennec <command> --help", () => {
  for (const command of ALL) {
    test(`${command} --help names every flag of ${command}, each with a help text`, () => {
      const r = fennec([command, "--help"]);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      expect(r.stdout).toStartWith(POSITIONAL_MODEL.includes(command) ? `Usage: fennec ${command} [MODEL] [options]` : `Usage: fennec ${command} [options]`);
      const flags = flagsOf(command);
      expect(flags.length).toBeGreaterThan(0);
      for (const flag of flags) {
        const line = r.stdout.split("\n").find((l) => new RegExp(`^\\s+(-\\w+, )?--${flag.name}( |$)`).test(l));
        expect({ flag: flag.name, line: line ?? null }).toMatchObject({ line: expect.stringContaining(flag.help) });
      }
    });
  }

  test("fennec version --help explains the version line", () => {
    for (const args of [["version", "--help"], ["version", "-h"], ["--version", "--help"]]) {
      const r = fennec(args);
      expect(r.code).toBe(0);
      expect(r.stdout).toStartWith("Usage: fennec version");
      expect(r.stdout).toContain("the build target and the kernel build");
      expect(r.stdout).toContain("-h, --help");
    }
  });

  test("fennec --help lists every command", () => {
    const r = fennec(["--help"]);
    expect(r.code).toBe(0);
    for (const command of ALL) expect(r.stdout).toContain(`  ${command} `);
  });
});

describe("bad input: one line, exit 2 (usage) or 1 (failed run), no stack trace", () => {
  const rows = BAD.flatMap((c) => c.commands.map((command) => ({ ...c, command })));
  test.each(rows.map((r) => [`${r.command}: ${r.name}`, r] as const))("%s", (_label, row) => {
    expectOneLineError(fennec([row.command, ...BASE[row.command], ...row.args]), row.says, row.code);
  });
  test.each(BAD_RAW.map((r) => [r.name, r] as const))("%s", (_label, row) => {
    expectOneLineError(fennec(row.args), row.says, row.code);
  });
});
