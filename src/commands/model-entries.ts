/**
 * The models `fennec serve` serves, from its command line: GGUF paths (the positional ones and --models), a folder
 * (every model file in it, as llama-server's --models-dir reads one: mmproj files and the later parts of a split model
 * are not models of their own), and the entries of a --config file's `models:` list, each a path or a mapping of the
 * flags that differ for that model (on the command line, that mapping's JSON text). Every model's flags are the
 * server's with its entry's over them; serve checks each model's set as it checks the command line, before loading.
 * @example const entries = readModelEntries(options); // [{ path: "a.gguf", options, own: [] }, ...]
 */
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type { FlagValue, Options } from "../command-line/flags.ts";
import { parseCommandArgs } from "../command-line/parse-args.ts";
import { CliError } from "../util/cli-error.ts";

/**
 * The flags a `models:` entry may set for its own model: its names, its context and KV budget, its batch limits,
 * its chat template and parsers, its sampling defaults and its keep-alive. The server's settings (port, keys, TLS,
 * logging) and the loading budgets are the server's alone.
 */
export const PER_MODEL_FLAGS: readonly string[] = [
  "model", "served-model-name", "max-model-len", "kv-cache-memory", "kv-cache-dtype", "block-size", "enable-prefix-caching",
  "no-enable-prefix-caching", "max-num-seqs", "max-num-batched-tokens", "threads", "seed", "chat-template",
  "chat-template-content-format", "default-chat-template-kwargs", "enable-auto-tool-choice", "tool-call-parser",
  "reasoning-parser", "generation-config", "override-generation-config", "keep-alive",
  "enable-lora", "lora-modules", "max-loras", "max-lora-rank", "max-cpu-loras",
];

/** One served model. */
export interface ModelEntry {
  /** GGUF path or Hugging Face name; null = the embedded default model */
  readonly path: string | null;
  /** the model's flags: the server's, with its entry's own over them (model = path) */
  readonly options: Options;
  /** the flags its entry set itself (dashed names) */
  readonly own: readonly string[];
}

/** A model file of a folder: a .gguf that is neither a projector nor a later part of a split model. */
function isModelFile(name: string): boolean {
  if (!/\.gguf$/i.test(name) || /^mmproj/i.test(name)) return false;
  const part = /-(\d{5})-of-\d{5}\.gguf$/i.exec(name);
  return part === null || part[1] === "00001";
}

/** The model files of a folder, by name; a path that is not a folder is itself. */
function expandFolder(path: string): string[] {
  let isFolder = false;
  try { isFolder = statSync(path).isDirectory(); } catch { return [path]; }
  if (!isFolder) return [path];
  const files = readdirSync(path).filter(isModelFile).sort().map((name) => join(path, name));
  if (files.length === 0) throw new CliError(`${path}: a folder with no .gguf model file in it`);
  return files;
}

/** A `models:` entry (its JSON text): the flags it sets, parsed as the command line's are; unknown keys refused. */
function parseEntry(text: string, index: number): { path: string; own: Options; keys: string[] } {
  const where = `models[${index}]`;
  let doc: unknown;
  try { doc = JSON.parse(text); } catch { throw new CliError(`${where}: not a mapping of flags: ${text.slice(0, 80)}`); }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new CliError(`${where}: not a mapping of flags: ${text.slice(0, 80)}`);
  const tokens: string[] = [];
  const keys: string[] = [];
  for (const [key, value] of Object.entries(doc as Record<string, unknown>)) {
    const name = key.replace(/_/g, "-");
    if (!PER_MODEL_FLAGS.includes(name)) throw new CliError(`${where}: unknown key ${key} (a model's keys: ${PER_MODEL_FLAGS.join(", ")})`);
    keys.push(name);
    if (value === true) tokens.push(`--${name}`);
    else if (value === false) tokens.push(`--${name}=false`);
    else if (Array.isArray(value)) tokens.push(`--${name}`, ...value.map(String));
    else tokens.push(`--${name}=${typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)}`);
  }
  const parsed = parseCommandArgs("serve", tokens);
  if (!parsed.ok) throw new CliError(`${where}: ${parsed.error}`);
  const path = parsed.value["model"];
  if (typeof path !== "string") throw new CliError(`${where}: needs model (a GGUF path or a Hugging Face name)`);
  const own: Record<string, FlagValue> = {};
  for (const name of keys) own[name] = parsed.value[name] ?? null;
  return { path, own, keys };
}

/** The models of the command line, in order: a folder's files by name, each `models:` entry with its own flags. */
export function readModelEntries(options: Options): ModelEntry[] {
  const listed = options["models"];
  const items = Array.isArray(listed) ? listed.map(String) : typeof listed === "string" ? [listed] : [];
  const first = typeof options["model"] === "string" ? options["model"] : null;
  // the server's own served names and LoRA adapters belong to its first model (an adapter fits one base model's
  // shapes); another model is named by its entry or its file and has the adapters its entry lists
  const base = (index: number): Options => ({ ...options, models: null, ...(index > 0 ? { "served-model-name": null, "lora-modules": null } : {}) });
  const entries: ModelEntry[] = [];
  const add = (path: string | null, own: Options = {}, keys: readonly string[] = []): void => {
    const index = entries.length;
    entries.push({ path, options: { ...base(index), ...own, model: path }, own: keys });
  };
  // no model at all: the embedded default one; a --config with only `models:` starts with its first entry
  if (first !== null || items.length === 0) for (const path of first === null ? [null] : expandFolder(first)) add(path);
  items.forEach((item, i) => {
    if (item.trimStart().startsWith("{")) {
      const entry = parseEntry(item, i);
      add(entry.path, entry.own, entry.keys);
    } else {
      for (const path of expandFolder(item)) add(path);
    }
  });
  return entries;
}
