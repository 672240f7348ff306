/**
 * Who may import whom (docs/architecture.md): every import of every file in src/ is checked against the row of its
 * folder, with no per-file exceptions, and the import graph must have no circle. A new import across layers fails
 * here; change the table only with a one-line why.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, posix, relative } from "node:path";
import ts from "typescript";

const SRC = join(import.meta.dir, "..", "src");

interface Rule {
  /** files (path relative to src/) the row is for; the first matching row wins */
  readonly files: RegExp;
  /** src files (relative to src/; "../x" is outside src/) this row may import, value or type */
  readonly may: readonly RegExp[];
  /** src files this row may import with `import type` only (shared type contracts across layers) */
  readonly mayTypes?: readonly RegExp[];
  /** npm packages this row may import (node: and bun builtins are always allowed) */
  readonly packages?: readonly RegExp[];
}

// resolve-pooler.ts: the resolved pooling and the embedding rules the ready message carries (a pooling model's contract)
const ENGINE_CONTRACTS = /^engine\/(protocol|stats|sampling-params|resolve-pooler)\.ts$/;
const MODEL_CONFIG = /^model\/model-config\.ts$/;
// typed configuration records (engine arguments, vLLM's JSON configs, server settings): a leaf every layer may read
const CONFIG = /^config\//;

const RULES: readonly Rule[] = [
  { files: /^util\//, may: [/^util\//] },
  // engine-args.ts carries --kv-events-config and --prefix-caching-hash-algo as their parsers' records (types only)
  { files: /^config\//, may: [CONFIG, /^util\//], mayTypes: [/^kv-events\/(kv-events-config|block-hash)\.ts$/] },
  { files: /^tensor\//, may: [/^tensor\//, CONFIG, /^util\//] },
  // default-model.ts embeds the built GGUF file into the binary
  { files: /^gguf\//, may: [/^gguf\//, /^tensor\//, CONFIG, /^util\//, /^\.\.\/build\/default-model\.gguf$/] },
  // the Hugging Face Hub client: HTTP and the cache layout, no model code
  { files: /^hub\//, may: [/^hub\//, CONFIG, /^util\//] },
  { files: /^tokenizer\//, may: [/^tokenizer\//, /^gguf\//, /^tensor\//, CONFIG, /^util\//], packages: [/^@huggingface\/jinja$/] },
  // kernel-files.ts embeds the built kernels; dawn-device.ts loads the webgpu package's native module
  { files: /^backend\//, may: [/^backend\//, /^tensor\//, CONFIG, /^util\//, /^\.\.\/build\/kernels-[a-z-]+\.wasm$/], packages: [/^webgpu(\/|$)/] },
  // LoRA adapters (worker side): read from GGUF and checked against the base model's config (a type), then handed to the model
  { files: /^lora\//, may: [/^lora\//, /^gguf\//, /^tensor\//, CONFIG, /^util\//], mayTypes: [MODEL_CONFIG] },
  // the model sees only the Backend interface: the concrete backend is passed in; lora/: the adapters' low-rank updates
  { files: /^model\//, may: [/^model\//, /^gguf\//, /^tensor\//, CONFIG, /^util\//, /^backend\/backend\.ts$/, /^lora\//] },
  // vision encoders (mmproj reading, image preprocessing, the encoder): model-side, in the worker like model/
  // image decoders: pure JS (fast-png, jpeg-js, omggif) and libwebp in WASM, all embedded in the binary
  // the encoder's thread builds its own kernel backend (create-backend.ts), as the engine's load-runner.ts does
  { files: /^vision\//, may: [/^vision\//, /^gguf\//, /^tensor\//, CONFIG, /^util\//, /^backend\/(backend|create-backend)\.ts$/], packages: [/^fast-png$/, /^jpeg-js$/, /^omggif$/, /^@jsquash\/webp\//] },
  // structured outputs on xgrammar: the grammar thread (engine side) and the checker (main side) share grammar-spec.ts
  { files: /^grammar\//, may: [/^grammar\//, CONFIG, /^util\//], packages: [/^@mlc-ai\/web-xgrammar$/] },
  // KV cache events (vLLM kv_events.py): block hashing and event records (both threads: the worker builds them), the
  // ZMTP publisher (main thread, fed by step messages); nothing of the engine's own
  { files: /^kv-events\//, may: [/^kv-events\//, /^util\//], packages: [/^@msgpack\/msgpack$/, /^cborg$/] },
  // request tracing (vllm/tracing/): the tracer provider and the per-request span, fed by the orchestrator's records
  { files: /^tracing\//, may: [/^tracing\//, CONFIG, /^util\//], mayTypes: [/^frontend\/orchestrator\.ts$/, /^engine\/stats\.ts$/], packages: [/^@opentelemetry\//] },
  // engine files run in the Worker (and hold the contracts both threads share): never text, HTTP, pipelines or metrics;
  // load-runner.ts builds the concrete backend in the worker and hands it to the model; the grammar thread's client
  // gives the sampler its bitmasks
  {
    files: /^engine\//,
    // kv-events: vLLM's block hashes for the prefix cache, and the KV event records the block pool appends to
    may: [/^engine\//, /^model\//, /^lora\//, /^gguf\//, /^tensor\//, CONFIG, /^util\//, /^backend\/create-backend\.ts$/, /^grammar\/(grammar-thread|grammar-protocol|grammar-spec)\.ts$/, /^kv-events\/(block-hash|kv-events|kv-event-queue)\.ts$/],
  },
  // one engine's main-thread side: sees text and the protocol, never weights or kernels; the engine reports its
  // ModelConfig (a type); model-source.ts opens the model file for the tokenizer (metadata, no weights)
  {
    files: /^frontend\//,
    // the engine client publishes its engine's KV events (kv-event-publisher.ts, fed by the step messages)
    may: [/^frontend\//, ENGINE_CONTRACTS, /^tokenizer\//, /^gguf\/model-source\.ts$/, CONFIG, /^util\//, /^kv-events\/kv-event-publisher\.ts$/],
    mayTypes: [MODEL_CONFIG],
  },
  {
    files: /^pipeline\//,
    may: [/^pipeline\//, /^frontend\//, ENGINE_CONTRACTS, /^tokenizer\//, CONFIG, /^util\//],
    mayTypes: [MODEL_CONFIG],
    packages: [/^yaml$/],
  },
  // metrics/ reads records only: what the engine, the front end and the pipeline produce, as types (the label values
  // of those records, e.g. SAVE_OUTCOMES, live in metrics/catalogue.ts); mfu.ts and the recorder need the model's shape
  {
    files: /^metrics\//,
    may: [/^metrics\//, CONFIG, /^util\//],
    mayTypes: [/^engine\/stats\.ts$/, /^frontend\/iteration-stats\.ts$/, /^pipeline\/stage-stats\.ts$/, MODEL_CONFIG],
    packages: [/^prom-client$/],
  },
  {
    files: /^server\//,
    // web-ui.ts embeds the built page (build/web-ui.html); grammar-checker.ts: an invalid schema / regex / grammar is a
    // 400 before any engine work
    // docs.ts embeds Swagger UI's files and ReDoc's standalone bundle (served at /docs and /redoc)
    may: [/^server\//, /^pipeline\//, /^frontend\//, /^metrics\//, /^tracing\//, /^tokenizer\//, /^engine\/(protocol|sampling-params|resolve-pooler)\.ts$/, CONFIG, /^util\//, /^\.\.\/package\.json$/, /^\.\.\/build\/web-ui\.html$/, /^grammar\/(grammar-checker|grammar-spec)\.ts$/],
    // the vision thread's client (images in, embeddings out), handed in by serve
    mayTypes: [/^vision\/vision-client\.ts$/],
    packages: [/^elysia$/, /^@elysiajs\/swagger$/, /^swagger-ui-dist\//, /^redoc\/bundles\/redoc\.standalone\.js$/],
  },
  // the command line: the flag table, the parser, help and one typed config per command, built from config/'s records
  // and parsers; only cli.ts and commands/ import it (COMMAND_LINE below), so no flag name reaches a layer
  // --kv-events-config and --prefix-caching-hash-algo are checked by their parsers in kv-events/
  { files: /^command-line\//, may: [/^command-line\//, CONFIG, /^util\//, /^kv-events\/(kv-events-config|block-hash)\.ts$/] },
  // wiring: the entry point and the command modules may import any src file, but no npm package of a layer below
  { files: /^(cli\.ts|commands\/)/, may: [/^(?!\.\.\/)/, /^\.\.\/package\.json$/] },
];

const BUILTIN = /^(node:|bun$|bun:)/;
/** the CLI's one-line error: only the command line turns a failure into it (below commands/ errors are values) */
const CLI_ERROR = "util/cli-error.ts";
const CLI_LAYER = /^(cli\.ts|commands\/)/;
/** the flag table and the untyped Options bag: read by the command line's own files, cli.ts and commands/ only */
const COMMAND_LINE = /^command-line\//;

interface Import {
  readonly specifier: string;
  readonly typeOnly: boolean;
}

/** Every import of one source text: static, `export ... from`, dynamic `import()`, `require()` and `typeof import()`. */
export function importsOf(fileName: string, text: string): Import[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: Import[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const allTypes = clause !== undefined && (clause.isTypeOnly ||
        (clause.name === undefined && clause.namedBindings !== undefined && ts.isNamedImports(clause.namedBindings) &&
          clause.namedBindings.elements.length > 0 && clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: allTypes });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: node.isTypeOnly });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push({ specifier: node.argument.literal.text, typeOnly: true });
    } else if (ts.isCallExpression(node) && node.arguments.length > 0 && ts.isStringLiteralLike(node.arguments[0]!)) {
      const isImport = node.expression.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === "require";
      if (isImport || isRequire) found.push({ specifier: (node.arguments[0] as ts.StringLiteralLike).text, typeOnly: false });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The forbidden imports of one file (path relative to src/), as one line each. */
export function violationsOf(file: string, text: string): string[] {
  const rule = RULES.find((r) => r.files.test(file));
  if (!rule) return [`${file}: no row in the import table for this file (add one to test/architecture.test.ts)`];
  const out: string[] = [];
  for (const { specifier, typeOnly } of importsOf(file, text)) {
    if (specifier.startsWith(".")) {
      const target = posix.normalize(posix.join(posix.dirname(file), specifier));
      const ok = rule.may.some((r) => r.test(target)) || (typeOnly && (rule.mayTypes ?? []).some((r) => r.test(target)));
      if (!ok) out.push(`${file} imports ${target}${typeOnly ? " (type only)" : ""}`);
      else if (target === CLI_ERROR && !CLI_LAYER.test(file)) out.push(`${file} imports ${target} (only cli.ts and commands/ make CLI errors)`);
      else if (COMMAND_LINE.test(target) && !CLI_LAYER.test(file) && !COMMAND_LINE.test(file)) out.push(`${file} imports ${target} (only cli.ts and commands/ read the command line)`);
    } else if (!BUILTIN.test(specifier) && !(rule.packages ?? []).some((r) => r.test(specifier))) {
      out.push(`${file} imports the package ${specifier}`);
    }
  }
  return out;
}

/** The src files (relative to src/) each file imports, value or type: an edge per import. */
function importGraph(files: readonly string[], read: (file: string) => string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = importsOf(file, read(file)).filter((i) => i.specifier.startsWith("."))
      .map((i) => posix.normalize(posix.join(posix.dirname(file), i.specifier)))
      .filter((t) => !t.startsWith("../"));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Every import circle (as "a -> b -> a"), found by depth-first search; type imports count: a circle of contracts and
 * implementations in one file is what this guards against. */
export function circlesOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const circles: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "open");
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === "open") circles.push([...path.slice(path.indexOf(next)), next].join(" -> "));
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(file, "done");
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return circles;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith(".ts") ? [relative(SRC, path).split("\\").join("/")] : [];
  });
}

describe("architecture: who may import whom", () => {
  test("no file in src/ imports across a forbidden edge", () => {
    const files = sourceFiles(SRC);
    expect(files.length).toBeGreaterThan(50);
    const violations = files.flatMap((f) => violationsOf(f, readFileSync(join(SRC, f), "utf8")));
    expect(violations).toEqual([]);
  });

  test("no import circles in src/", () => {
    const files = sourceFiles(SRC);
    expect(circlesOf(importGraph(files, (f) => readFileSync(join(SRC, f), "utf8")))).toEqual([]);
  });

  test("the circle detector finds a circle and passes a tree", () => {
    expect(circlesOf(new Map([["a.ts", ["b.ts"]], ["b.ts", ["c.ts"]], ["c.ts", ["a.ts"]]]))).toEqual(["a.ts -> b.ts -> c.ts -> a.ts"]);
    expect(circlesOf(new Map([["a.ts", ["b.ts", "c.ts"]], ["b.ts", ["c.ts"]], ["c.ts", []]]))).toEqual([]);
    expect(circlesOf(new Map([["a.ts", ["a.ts"]]]))).toEqual(["a.ts -> a.ts"]);
  });

  test("the parser sees every kind of import", () => {
    const text = [
      'import { a } from "./a.ts";',
      'import type { B } from "./b.ts";',
      'import { type C, type D } from "./c.ts";',
      'export { e } from "./e.ts";',
      'const f = await import("./f.ts");',
      'const g = require("./g.ts") as typeof import("./h.ts");',
      '// import { z } from "./commented.ts";',
    ].join("\n");
    expect(importsOf("x.ts", text)).toEqual([
      { specifier: "./a.ts", typeOnly: false },
      { specifier: "./b.ts", typeOnly: true },
      { specifier: "./c.ts", typeOnly: true },
      { specifier: "./e.ts", typeOnly: false },
      { specifier: "./f.ts", typeOnly: false },
      { specifier: "./g.ts", typeOnly: false },
      { specifier: "./h.ts", typeOnly: true },
    ]);
  });

  // each row can fail: a forbidden edge per layer is reported, the allowed twin is not
  const CASES: readonly { file: string; line: string; forbidden: boolean }[] = [
    { file: "util/x.ts", line: 'import { f } from "../tensor/dtypes.ts";', forbidden: true },
    { file: "tensor/x.ts", line: 'import { f } from "../gguf/reader.ts";', forbidden: true },
    { file: "tensor/x.ts", line: 'import { f } from "../util/result.ts";', forbidden: false },
    { file: "gguf/x.ts", line: 'import { f } from "../model/read-model-config.ts";', forbidden: true },
    { file: "backend/wasm/x.ts", line: 'import type { M } from "../../model/model-config.ts";', forbidden: true },
    { file: "model/x.ts", line: 'import { f } from "../backend/create-backend.ts";', forbidden: true },
    { file: "model/x.ts", line: 'import type { Backend } from "../backend/backend.ts";', forbidden: false },
    { file: "model/x.ts", line: 'const { Engine } = await import("../engine/engine.ts");', forbidden: true },
    { file: "engine/engine.ts", line: 'import { f } from "../tokenizer/tokenizer.ts";', forbidden: true },
    { file: "engine/worker.ts", line: 'import { f } from "../pipeline/stage-pipeline.ts";', forbidden: true },
    { file: "engine/worker.ts", line: 'import { f } from "../frontend/engine-client.ts";', forbidden: true },
    { file: "frontend/engine-client.ts", line: 'import { f } from "../model/runner.ts";', forbidden: true },
    { file: "frontend/engine-client.ts", line: 'import { ModelConfig } from "../model/model-config.ts";', forbidden: true },
    { file: "frontend/engine-client.ts", line: 'import type { ModelConfig } from "../model/model-config.ts";', forbidden: false },
    { file: "frontend/x.ts", line: 'import { f } from "../pipeline/stage-pipeline.ts";', forbidden: true },
    { file: "frontend/x.ts", line: 'import { Engine } from "../engine/engine.ts";', forbidden: true },
    { file: "engine/engine.ts", line: 'import type { Options } from "../command-line/flags.ts";', forbidden: true },
    { file: "engine/engine.ts", line: 'import type { EngineArgs } from "../config/engine-args.ts";', forbidden: false },
    { file: "backend/wasm/x.ts", line: 'import { Engine } from "../../engine/engine.ts";', forbidden: true },
    { file: "tokenizer/x.ts", line: 'import { Runner } from "../model/runner.ts";', forbidden: true },
    { file: "server/x.ts", line: 'import { Runner } from "../model/runner.ts";', forbidden: true },
    { file: "pipeline/x.ts", line: 'import { parseCommandArgs } from "../command-line/parse-args.ts";', forbidden: true },
    { file: "pipeline/x.ts", line: 'import type { Options } from "../command-line/flags.ts";', forbidden: true },
    { file: "pipeline/x.ts", line: 'import type { StageChainConfig } from "../config/stage-chain-config.ts";', forbidden: false },
    { file: "pipeline/x.ts", line: 'import { Engine } from "../engine/engine.ts";', forbidden: true },
    { file: "metrics/x.ts", line: 'import { Elysia } from "elysia";', forbidden: true },
    { file: "metrics/x.ts", line: 'import type { IterationStats } from "../frontend/iteration-stats.ts";', forbidden: false },
    { file: "metrics/x.ts", line: 'import { IterationTracker } from "../frontend/iteration-stats.ts";', forbidden: true },
    { file: "metrics/x.ts", line: 'import { StagePipeline } from "../pipeline/stage-pipeline.ts";', forbidden: true },
    { file: "server/x.ts", line: 'import { Counter } from "prom-client";', forbidden: true },
    { file: "server/x.ts", line: 'import { Elysia } from "elysia";', forbidden: false },
    { file: "commands/x.ts", line: 'import { Elysia } from "elysia";', forbidden: true },
    { file: "pipeline/x.ts", line: 'import { CliError } from "../util/cli-error.ts";', forbidden: true },
    { file: "gguf/x.ts", line: 'import { CliError } from "../util/cli-error.ts";', forbidden: true },
    { file: "commands/x.ts", line: 'import { CliError } from "../util/cli-error.ts";', forbidden: false },
    { file: "config/x.ts", line: 'import type { KvOffloadConfig } from "./kv-transfer-config.ts";', forbidden: false },
    { file: "config/x.ts", line: 'import { err } from "../util/result.ts";', forbidden: false },
    { file: "config/x.ts", line: 'import type { ModelConfig } from "../model/model-config.ts";', forbidden: true },
    { file: "config/x.ts", line: 'import { Engine } from "../engine/engine.ts";', forbidden: true },
    { file: "config/x.ts", line: 'import type { Options } from "../command-line/flags.ts";', forbidden: true },
    { file: "util/x.ts", line: 'import type { EngineArgs } from "../config/engine-args.ts";', forbidden: true },
    { file: "command-line/x.ts", line: 'import { parseKvTransfer } from "../config/kv-transfer-config.ts";', forbidden: false },
    { file: "command-line/x.ts", line: 'import { Engine } from "../engine/engine.ts";', forbidden: true },
    { file: "command-line/x.ts", line: 'import { CliError } from "../util/cli-error.ts";', forbidden: true },
    { file: "server/x.ts", line: 'import type { ServerSettings } from "../config/server-settings.ts";', forbidden: false },
    { file: "server/x.ts", line: 'import type { Options } from "../command-line/flags.ts";', forbidden: true },
    { file: "commands/x.ts", line: 'import { serveConfig } from "../command-line/serve-config.ts";', forbidden: false },
    { file: "cli.ts", line: 'import { parseCommandArgs } from "./command-line/parse-args.ts";', forbidden: false },
    { file: "commands/x.ts", line: 'import { Engine } from "../engine/engine.ts";', forbidden: false },
    { file: "newfolder/x.ts", line: "", forbidden: true },
  ];
  for (const c of CASES) {
    test(`${c.file}: ${c.line || "(no row)"} is ${c.forbidden ? "forbidden" : "allowed"}`, () => {
      expect(violationsOf(c.file, c.line).length > 0).toBe(c.forbidden);
    });
  }
});
