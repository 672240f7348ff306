/**
 * Structured outputs end to end (HTTP app -> engine Worker -> kernels) on random-weight models of real shapes with
 * their real tokenizers (make-model: smollm2-135m / GPT-2 byte-level BPE, qwen2.5-0.5b and qwen3-0.6b / Qwen2's
 * 151k BPE, one layer each) and on the default model (stories260K, SentencePiece byte fallback). Random weights make
 * this a strong test: nothing but the token mask can make the output valid. Every JSON answer parses and validates
 * against its schema (ajv) over 60 schemas; regex, choice and EBNF answers match.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Ajv from "ajv";
import { readGguf } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { createEngineFrontend } from "../../src/frontend/engine-frontend.ts";
import type { Orchestrator } from "../../src/frontend/orchestrator.ts";
import { createApp } from "../../src/server/app.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../../src/server/server-options.ts";
import { llamaVocabPath } from "../../scripts/llama-vocab.ts";
import { MODEL_SHAPES } from "../../scripts/model-shapes.ts";
import { randomModel } from "../../scripts/random-model.ts";
import { SCHEMAS } from "./json-schemas.ts";

setDefaultTimeout(240_000);

const dir = mkdtempSync(join(tmpdir(), "fennec-grammar-"));
const orchestrators: Orchestrator[] = [];
afterAll(async () => {
  await Promise.all(orchestrators.map((o) => o.shutdown()));
  rmSync(dir, { recursive: true, force: true });
});

async function serve(modelPath: string | null) {
  const orchestrator = await createEngineFrontend({
    modelPath,
    engineArgs: { maxNumSeqs: 16, maxNumBatchedTokens: 512, maxModelLen: 512, blockSize: 16, kvCacheMemoryBytes: null, enablePrefixCaching: true, threads: 1, device: "cpu" },
  });
  orchestrators.push(orchestrator);
  const app = createApp({
    orchestrator, servedModelName: "m", modelPath: modelPath ?? "default", apiKey: null, enablePerRequestMetrics: false,
    forceIncludeUsage: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES, shutdownSignal: new AbortController().signal, log: () => {},
  });
  return async (path: string, body: unknown): Promise<Record<string, any>> => {
    const response = await app.handle(new Request(`http://localhost${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }));
    const json = await response.json() as Record<string, any>;
    if (response.status !== 200) throw new Error(`${response.status}: ${JSON.stringify(json)}`);
    return json;
  };
}

function makeModel(shapeName: string): string {
  const shape = { ...MODEL_SHAPES[shapeName]!, numLayers: 1 };
  const vocab = readGguf(llamaVocabPath(shape.vocab));
  if (!vocab.ok) throw new Error(vocab.error);
  const path = join(dir, `${shapeName}.gguf`);
  writeGgufFile(path, randomModel({ shapeName, shape, type: "q8_0", seed: 3, vocab: vocab.value }));
  return path;
}

const ajv = new Ajv({ strict: false });
// RFC 3339 full-date (ajv-formats is not a dependency; this is the one format the schemas use)
ajv.addFormat("date", /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/);

const MODELS: [string, string | null][] = [
  ["default model (stories260K)", null],
  ["tiny-smollm2-135m", "tiny-smollm2-135m"],
  ["tiny-qwen2.5-0.5b", "tiny-qwen2.5-0.5b"],
  ["tiny-qwen3-0.6b", "tiny-qwen3-0.6b"],
];

describe.each(MODELS)("structured outputs on %s", (_label, shapeName) => {
  let post: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => { post = await serve(shapeName === null ? null : makeModel(shapeName)); });

  test(`every answer under ${SCHEMAS.length} JSON schemas parses and validates (ajv)`, async () => {
    const answers = await Promise.all(SCHEMAS.map((schema, i) => post("/v1/completions", {
      prompt: "Data:", max_tokens: 200, temperature: 1, seed: i,
      response_format: { type: "json_schema", json_schema: { name: `s${i}`, schema } },
      structured_outputs: { disable_any_whitespace: true },
    })));
    answers.forEach((answer, i) => {
      const { text, finish_reason } = answer.choices[0];
      const context = `schema ${i} ${JSON.stringify(SCHEMAS[i])} -> ${JSON.stringify(text)}`;
      expect(finish_reason, context).toBe("stop");
      const value = JSON.parse(text);
      const valid = ajv.validate(SCHEMAS[i]!, value);
      expect(valid ? null : `${context}: ${ajv.errorsText()}`).toBeNull();
    });
  });

  test("regex, choice and EBNF answers match", async () => {
    const regexes = ["[0-9]{3}-[a-z]{2}", "(cat|dog)s?", "[A-F0-9]{4}", "x+y?z{2}"];
    const choices = [["alpha", "beta gamma", "δέλτα"], ["yes", "no"]];
    const ebnf = 'root ::= "[" num ("," num)? ("," num)? "]"\nnum ::= [1-9] [0-9]?';
    const [rx, ch, gr] = await Promise.all([
      Promise.all(regexes.map((regex, i) => post("/v1/completions", { prompt: "Id:", max_tokens: 40, temperature: 1, seed: i, structured_outputs: { regex } }))),
      Promise.all(choices.map((choice, i) => post("/v1/chat/completions", { messages: [{ role: "user", content: "pick" }], max_tokens: 40, temperature: 1, seed: i, structured_outputs: { choice } }))),
      Promise.all([1, 2, 3].map((seed) => post("/v1/completions", { prompt: "List:", max_tokens: 60, temperature: 1, seed, structured_outputs: { grammar: ebnf } }))),
    ]);
    rx.forEach((a, i) => expect(a.choices[0].text).toMatch(new RegExp(`^(?:${regexes[i]})$`)));
    ch.forEach((a, i) => expect(choices[i]).toContain(a.choices[0].message.content));
    gr.forEach((a) => expect(a.choices[0].text).toMatch(/^\[[1-9][0-9]?(,[1-9][0-9]?){0,2}\]$/));
  });
});
