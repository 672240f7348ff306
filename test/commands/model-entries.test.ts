/** The models of a serve command line: folders, `models:` entries with their own flags, the first model's names. */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { PER_MODEL_FLAGS, readModelEntries } from "../../src/commands/model-entries.ts";
import { FLAGS } from "../../src/command-line/flags.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-model-entries-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function entries(args: string[]) {
  const parsed = parseCommandArgs("serve", args);
  if (!parsed.ok) throw new Error(parsed.error);
  return readModelEntries(parsed.value);
}

describe("model entries", () => {
  test("every per-model key is a serve flag", () => {
    for (const name of PER_MODEL_FLAGS) expect(FLAGS.some((f) => f.name === name && f.commands.includes("serve"))).toBe(true);
  });

  test("no model: the embedded one; paths in order; the command line's served names are the first model's", () => {
    expect(entries([]).map((e) => e.path)).toEqual([null]);
    const list = entries(["a.gguf", "b.gguf", "--served-model-name", "first", "--max-model-len", "256"]);
    expect(list.map((e) => e.path)).toEqual(["a.gguf", "b.gguf"]);
    expect(list.map((e) => e.options["served-model-name"])).toEqual([["first"], null]);
    expect(list.map((e) => e.options["max-model-len"])).toEqual([256, 256]);
  });

  test("a folder is its model files by name: no projector, no later split part", () => {
    const folder = join(dir, "models");
    mkdirSync(folder);
    for (const name of ["b.gguf", "a.GGUF", "mmproj-b.gguf", "big-00001-of-00003.gguf", "big-00002-of-00003.gguf", "readme.md"]) writeFileSync(join(folder, name), "");
    expect(entries([folder]).map((e) => e.path)).toEqual(["a.GGUF", "b.gguf", "big-00001-of-00003.gguf"].map((n) => join(folder, n)));
    const empty = join(dir, "empty");
    mkdirSync(empty);
    expect(() => entries([empty])).toThrow("a folder with no .gguf model file in it");
  });

  test("an entry's flags go over the server's, for that model only", () => {
    const list = entries(["--max-model-len", "512", "--models", JSON.stringify({ model: "a.gguf", served_model_name: ["x", "y"], "max-model-len": 128, "enable-auto-tool-choice": true, "tool-call-parser": "hermes", "keep-alive": "-1" }), "b.gguf"]);
    expect(list.map((e) => e.path)).toEqual(["a.gguf", "b.gguf"]);
    expect(list[0]!.options["served-model-name"]).toEqual(["x", "y"]);
    expect(list[0]!.options["max-model-len"]).toBe(128);
    expect(list[0]!.options["tool-call-parser"]).toBe("hermes");
    expect(list[0]!.own).toEqual(["model", "served-model-name", "max-model-len", "enable-auto-tool-choice", "tool-call-parser", "keep-alive"]);
    expect(list[1]!.options["max-model-len"]).toBe(512);
    expect(list[1]!.options["tool-call-parser"]).toBeNull();
    expect(list[1]!.own).toEqual([]);
  });

  test("LoRA adapters are per model: the command line's belong to the first model, an entry's to that entry", () => {
    const json = JSON.stringify({ name: "poet", path: "/p.gguf", base_model_name: "b" });
    const list = entries(["--enable-lora", "--lora-modules", "sql=/s.gguf", "--max-loras", "2", "a.gguf", "--models", JSON.stringify({ model: "b.gguf", "lora-modules": ["chat=/c.gguf", json], "max-lora-rank": 64 }), "c.gguf"]);
    expect(list.map((e) => e.path)).toEqual(["a.gguf", "b.gguf", "c.gguf"]);
    expect(list.map((e) => e.options["lora-modules"])).toEqual([["sql=/s.gguf"], ["chat=/c.gguf", json], null]);
    expect(list.map((e) => [e.options["enable-lora"], e.options["max-loras"], e.options["max-lora-rank"]])).toEqual([[true, 2, null], [true, 2, 64], [true, 2, null]]);
    expect(list[1]!.own).toEqual(["model", "lora-modules", "max-lora-rank"]);
  });

  test("a bad entry says which and why", () => {
    expect(() => entries(["--models", JSON.stringify({ model: "a.gguf", port: 1 })])).toThrow(/^models\[0\]: unknown key port \(a model's keys: model, /);
    expect(() => entries(["--models", JSON.stringify({ "max-model-len": 1 })])).toThrow("models[0]: needs model");
    expect(() => entries(["--models", JSON.stringify({ model: "a.gguf", "max-model-len": "x" })])).toThrow("models[0]: --max-model-len needs an integer");
    expect(() => entries(["--models", "{not json"])).toThrow("models[0]: not a mapping of flags");
  });
});
