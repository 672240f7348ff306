/**
 * `fennec run-batch` on the embedded stories260K model (real engines): the OpenAI batch output format, error lines for
 * malformed input, greedy pd output equal to single-stage, and the offline --log-stats tables (single, pd, the
 * three-stage example) with every invariant and format rule.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { runBatch, type BatchOutputLine } from "../../src/commands/run-batch.ts";
import { checkTables } from "../metrics/omni-invariants.ts";
import { parseTables } from "../metrics/omni-table-parser.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-run-batch-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const input = join(dir, "in.jsonl");
writeFileSync(input, [
  JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/completions", body: { prompt: "Once upon a time", max_tokens: 10, temperature: 0 } }),
  JSON.stringify({ custom_id: "b", method: "POST", url: "/v1/chat/completions", body: { messages: [{ role: "user", content: "Lily and Tom" }], max_tokens: 8, temperature: 0 } }),
  "{not json",
  JSON.stringify({ custom_id: "d", method: "POST", url: "/v1/completions", body: { prompt: "The cat", max_tokens: 6, temperature: 0, top_p: 5 } }),
  JSON.stringify({ custom_id: "e", method: "GET", url: "/v1/completions", body: {} }),
  "",
  JSON.stringify({ custom_id: "f", method: "POST", url: "/v1/completions", body: { prompt: "A big dog", max_tokens: 7, temperature: 0 } }),
].join("\n") + "\n");

async function run(name: string, extra: string[]): Promise<{ lines: BatchOutputLine[]; printed: string; file: string }> {
  const output = join(dir, `${name}.jsonl`);
  const parsed = parseCommandArgs("run-batch", ["-i", input, "-o", output, "--max-num-seqs", "4", "--threads", "1", ...extra]);
  if (!parsed.ok) throw new Error(parsed.error);
  let printed = "";
  const lines = await runBatch(parsed.value, { stdout: (t) => { printed += t; } });
  return { lines, printed, file: readFileSync(output, "utf8") };
}

function textOf(line: BatchOutputLine): string {
  const body = line.response?.body as { choices: { text?: string; message?: { content: string } }[] };
  const choice = body.choices[0]!;
  return choice.text ?? choice.message!.content;
}

describe("run-batch", () => {
  let single: Awaited<ReturnType<typeof run>>;

  test("output lines: one per request in input order, vLLM's shape, errors keep custom_id or line-N", async () => {
    single = await run("single", ["--log-stats"]);
    const fileLines = single.file.trimEnd().split("\n").map((l) => JSON.parse(l) as BatchOutputLine);
    expect(fileLines.map((l) => l.custom_id)).toEqual(["a", "b", "line-3", "d", "e", "f"]);
    for (const l of fileLines) {
      expect(l.id).toMatch(/^vllm-[0-9a-f]{32}$/);
      expect(l.response!.request_id).toMatch(/^vllm-batch-[0-9a-f]{32}$/);
    }
    const [a, b, bad, d, e, f] = fileLines;
    expect(a!.response!.status_code).toBe(200);
    expect(a!.error).toBeNull();
    expect((a!.response!.body as { object: string }).object).toBe("text_completion");
    expect((b!.response!.body as { object: string }).object).toBe("chat.completion");
    expect((f!.response!.body as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(7);
    expect(bad!.response!.status_code).toBe(400);
    expect(String(bad!.error)).toContain("line 3: not valid JSON");
    expect(d!.response!.status_code).toBe(400);
    expect(JSON.stringify(d!.error)).toContain("top_p");
    expect(String(e!.error)).toContain('method must be "POST"');
  }, 60_000);

  test("--log-stats offline: the tables once for the batch, e2e_requests = the requests that ran", () => {
    const tables = parseTables(single.printed);
    expect(tables.filter((t) => t.title === "Overall Summary").length).toBe(1);
    const perRequest = checkTables(tables, { numRequests: 3, numStages: 1, transfers: false });
    const outs = [...perRequest.values()].map(({ stage }) => Number(stage.rows.get("num_tokens_out")!.get("0")));
    expect(outs.sort()).toEqual([10, 7, 8].sort());
  });

  test("--pipeline pd: same greedy text as single-stage; KV blocks on edge 0->1", async () => {
    const pd = await run("pd", ["--pipeline", "pd", "--log-stats"]);
    for (const k of [0, 1, 5]) expect(textOf(pd.lines[k]!)).toBe(textOf(single.lines[k]!));
    const perRequest = checkTables(parseTables(pd.printed), { numRequests: 3, numStages: 2, transfers: true });
    for (const { transfer, stage } of perRequest.values()) {
      expect(Number(transfer!.rows.get("size_kbytes")!.get("0->1")!.replaceAll(",", ""))).toBeGreaterThan(1);
      expect(stage.rows.get("num_tokens_out")!.get("0")).toBe("1");
    }
  }, 60_000);

  test("--stage-config examples/three-stage.yaml: three stages, a KV edge and a text edge", async () => {
    const three = await run("three", ["--stage-config", join(import.meta.dir, "../../examples/three-stage.yaml"), "--log-stats"]);
    expect(three.lines.filter((l) => l.error === null).length).toBe(3);
    const perRequest = checkTables(parseTables(three.printed), { numRequests: 3, numStages: 3, transfers: true });
    for (const { transfer } of perRequest.values()) expect(transfer!.headers).toEqual(["Field", "0->1", "1->2"]);
  }, 60_000);

  test("fennec run-batch with a bad stage config: exit 2, one line naming the file, the stage and the problem", async () => {
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "stage_args:\n  - stage_id: 0\n  - stage_id: 1\n    input_type: kv_blocks\n    engine_args: {block_size: 32}\n");
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../../src/cli.ts"), "run-batch", "-i", input, "-o", join(dir, "never.jsonl"), "--stage-config", bad], { stdout: "pipe", stderr: "pipe" });
    expect(await proc.exited).toBe(2);
    const lines = (await new Response(proc.stderr).text()).trim().split("\n");
    expect(lines.length).toBe(1);
    expect(lines[0]).toMatch(/^fennec: .*bad\.yaml: stage 1: input_type kv_blocks needs the same block_size as stage 0/);
  }, 30_000);

  test("results are appended as they finish (a killed run keeps them), and the output is truncated at start", async () => {
    const many = join(dir, "many.jsonl");
    const count = 400;
    writeFileSync(many, Array.from({ length: count }, (_, i) => JSON.stringify({
      custom_id: `r${i}`, method: "POST", url: "/v1/completions", body: { prompt: "Once upon a time", max_tokens: 60, temperature: 1, seed: i, ignore_eos: true },
    })).join("\n") + "\n");
    const output = join(dir, "killed.jsonl");
    // an earlier run's complete-looking file
    const stale = JSON.stringify({ id: "vllm-old", custom_id: "stale", response: { status_code: 200, request_id: "x", body: {} }, error: null });
    writeFileSync(output, `${stale}\n`);
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "../../src/cli.ts"), "run-batch", "-i", many, "-o", output, "--max-num-seqs", "4", "--threads", "1"], { stdout: "ignore", stderr: "pipe" });
    const lineCount = (): number => readFileSync(output, "utf8").split("\n").filter((l) => l !== "").length;
    const deadline = Date.now() + 60_000;
    // kill it once some results are in but far from all
    while (Date.now() < deadline && (readFileSync(output, "utf8").includes("stale") || lineCount() < 5)) await Bun.sleep(20);
    proc.kill("SIGKILL");
    await proc.exited;
    const kept = readFileSync(output, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as BatchOutputLine);
    expect(kept.length).toBeGreaterThanOrEqual(5);
    expect(kept.length).toBeLessThan(count);
    expect(kept.some((l) => l.custom_id === "stale")).toBe(false);
    for (const line of kept) {
      expect(line.custom_id).toMatch(/^r\d+$/);
      expect(line.response?.status_code).toBe(200);
      expect((line.response?.body as { choices: { finish_reason: string }[] }).choices[0]!.finish_reason).toBe("length");
    }
    expect(new Set(kept.map((l) => l.custom_id)).size).toBe(kept.length);
  }, 90_000);

  test("a model that does not load leaves an empty output file, never an earlier run's", async () => {
    const output = join(dir, "failed-load.jsonl");
    writeFileSync(output, "an earlier run's output\n");
    const parsed = parseCommandArgs("run-batch", ["-i", input, "-o", output, "--model", join(dir, "no-such-model.gguf")]);
    if (!parsed.ok) throw new Error(parsed.error);
    await expect(runBatch(parsed.value)).rejects.toThrow();
    expect(readFileSync(output, "utf8")).toBe("");
  });

  test("a missing input file is one CLI error", async () => {
    const parsed = parseCommandArgs("run-batch", ["-i", join(dir, "nope.jsonl"), "-o", join(dir, "x.jsonl")]);
    if (!parsed.ok) throw new Error(parsed.error);
    await expect(runBatch(parsed.value)).rejects.toThrow(/cannot read .*nope\.jsonl/);
  });
});
