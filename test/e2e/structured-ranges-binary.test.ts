/**
 * Number ranges under structured outputs, end to end in the compiled binary: 200 random schemas with ranges (random
 * bounds, inclusive and exclusive, integers and numbers, nested objects, arrays of them), each asked for n: 3 choices
 * once streamed and once not; every returned document must parse and validate with ajv against its schema. xgrammar's
 * own range rules failed this (integer maximum 120 let 126 through in one choice of three).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import { freePort } from "./server-process.ts";
import { rng } from "../helpers/prng.ts";
import { randomRange } from "../grammar/random-ranges.ts";

setDefaultTimeout(120_000);

const BINARY = join(import.meta.dir, "..", "..", "dist", "fennec");
const NUM_SCHEMAS = 200;
const CONCURRENCY = 16;
let server: ReturnType<typeof Bun.spawn> | null = null;
let base = "";

beforeAll(async () => {
  if (!existsSync(BINARY)) throw new Error(`${BINARY} is missing: run npx bun run build.ts first`);
  const port = freePort();
  server = Bun.spawn([BINARY, "serve", "--port", String(port), "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'], { stdout: "ignore", stderr: "pipe" });
  base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    if (await fetch(`${base}/health`).then((r) => r.ok, () => false)) break;
    await Bun.sleep(100);
  }
});
afterAll(async () => {
  server?.kill();
  await server?.exited;
});

type Schema = Record<string, unknown>;

/** schema i: ranges inside one of a few shapes */
function randomSchema(random: () => number, i: number): Schema {
  // both bounds: under a one-sided range a random-weight model's digits can run past max_tokens (the unit tests
  // cover one-sided ranges)
  const r = (): Schema => ({ ...randomRange(random, false, true) });
  const shapes: (() => Schema)[] = [
    () => r(),
    () => ({ type: "object", properties: { x: r(), y: r() }, required: ["x", "y"] }),
    () => ({ type: "object", properties: { inner: { type: "object", properties: { v: r() }, required: ["v"] }, w: r() }, required: ["inner", "w"] }),
    () => ({ type: "array", items: r(), minItems: 1, maxItems: 3 }),
    () => ({ type: "object", properties: { list: { type: "array", items: { type: "object", properties: { p: r() }, required: ["p"] }, minItems: 1, maxItems: 2 } }, required: ["list"] }),
  ];
  return shapes[i % shapes.length]!();
}

interface Answer {
  readonly schema: Schema;
  readonly stream: boolean;
  readonly choices: { readonly text: string; readonly finish: string | null }[];
}

async function ask(schema: Schema, stream: boolean, seed: number): Promise<Answer> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "", messages: [{ role: "user", content: "Give numbers." }], n: 3, max_tokens: 160, temperature: 1, seed, stream,
      response_format: { type: "json_schema", json_schema: { name: "ranges", schema } },
    }),
  });
  if (!res.ok) throw new Error(`${res.status} ${await res.text()} for ${JSON.stringify(schema)}`);
  const choices = [0, 1, 2].map(() => ({ text: "", finish: null as string | null }));
  if (!stream) {
    const body = (await res.json()) as { choices: { index: number; message: { content: string }; finish_reason: string }[] };
    for (const c of body.choices) choices[c.index] = { text: c.message.content, finish: c.finish_reason };
  } else {
    for (const line of (await res.text()).split("\n")) {
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const chunk = JSON.parse(line.slice(6)) as { choices: { index: number; delta: { content?: string }; finish_reason: string | null }[] };
      for (const c of chunk.choices) {
        choices[c.index]!.text += c.delta.content ?? "";
        if (c.finish_reason) choices[c.index]!.finish = c.finish_reason;
      }
    }
  }
  return { schema, stream, choices };
}

describe("number ranges in the binary: 200 random schemas, n: 3, streamed and not", () => {
  test("every choice is a document that validates with ajv", async () => {
    const random = rng(5150);
    const jobs = Array.from({ length: NUM_SCHEMAS }, (_, i) => randomSchema(random, i)).flatMap((schema, i) => [[schema, false, i], [schema, true, i]] as const);
    const answers: Answer[] = [];
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < jobs.length) {
        const [schema, stream, seed] = jobs[next++]!;
        answers.push(await ask(schema, stream, seed));
      }
    }));
    expect(answers).toHaveLength(NUM_SCHEMAS * 2);
    const ajv = new Ajv({ strict: false });
    const failures: string[] = [];
    for (const { schema, stream, choices } of answers) {
      const validate = ajv.compile(schema);
      for (const [i, { text, finish }] of choices.entries()) {
        let doc: unknown;
        try {
          doc = JSON.parse(text);
        } catch {
          failures.push(`${stream ? "stream" : "json"} choice ${i} (${finish}) is not JSON: ${text} for ${JSON.stringify(schema)}`);
          continue;
        }
        if (!validate(doc)) failures.push(`${stream ? "stream" : "json"} choice ${i}: ${text} fails ${JSON.stringify(schema)}: ${ajv.errorsText(validate.errors)}`);
      }
    }
    expect(failures).toEqual([]);
  });
});
