/**
 * --runner pooling on a generative GGUF (the embedded stories260K: no pooling type, so LAST pooling, vLLM's default for
 * a converted decoder) through `fennec run-batch`: /v1/embeddings, /v1/score and /v1/rerank lines are answered by the
 * engine's pooling requests, a generation line on the pooling model is vLLM's 400, and --pooler-config MEAN changes
 * the vectors.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { runBatch, type BatchOutputLine } from "../../src/commands/run-batch.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-pooling-runner-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const input = join(dir, "in.jsonl");
writeFileSync(input, [
  { custom_id: "e", method: "POST", url: "/v1/embeddings", body: { input: ["Once upon a time", "The cat sat"], encoding_format: "float" } },
  { custom_id: "s", method: "POST", url: "/v1/score", body: { text_1: "Once upon a time", text_2: ["Once upon a time", "The cat sat"] } },
  { custom_id: "r", method: "POST", url: "/v1/rerank", body: { query: "The cat sat", documents: ["Once upon a time", "The cat sat"] } },
  { custom_id: "c", method: "POST", url: "/v1/completions", body: { prompt: "Once", max_tokens: 2 } },
].map((l) => JSON.stringify(l)).join("\n") + "\n");

async function run(name: string, extra: string[]): Promise<Map<string, BatchOutputLine>> {
  const parsed = parseCommandArgs("run-batch", ["-i", input, "-o", join(dir, `${name}.jsonl`), "--threads", "1", "--runner", "pooling", ...extra]);
  if (!parsed.ok) throw new Error(parsed.error);
  const lines = await runBatch(parsed.value, { stdout: () => {} });
  return new Map(lines.map((l) => [l.custom_id, l]));
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const body = (l: BatchOutputLine | undefined): Json => l!.response!.body as Json;

describe("--runner pooling on stories260K through run-batch", () => {
  test("embeddings, score and rerank lines are answered; a completion line is vLLM's 400; MEAN pools differently", async () => {
    const last = await run("last", []);
    const e = body(last.get("e"));
    expect(e.data).toHaveLength(2);
    const [a, b] = e.data.map((d: Json) => d.embedding as number[]);
    expect(a.length).toBe(64); // stories260K's hidden size
    expect(Math.hypot(...a)).toBeCloseTo(1, 4);
    const dot = a.reduce((s: number, x: number, i: number) => s + x * b[i], 0);
    const s = body(last.get("s"));
    expect(s.data[0].score).toBeCloseTo(1, 5);
    expect(s.data[1].score).toBeCloseTo(dot, 5);
    const r = body(last.get("r"));
    expect(r.results[0].index).toBe(1);
    expect(r.results[0].relevance_score).toBeCloseTo(1, 5);
    const c = last.get("c")!;
    expect(c.response!.status_code).toBe(400);
    expect((c.error as Json).error.message).toContain("The model does not support Completions API");

    const mean = await run("mean", ["--pooler-config", '{"pooling_type": "MEAN"}']);
    const m = body(mean.get("e")).data[0].embedding as number[];
    expect(m.length).toBe(64);
    expect(m).not.toEqual(a);
  }, 120_000);
});
