/**
 * What serve hands to Ollama's routes (server/ollama/ollama-serving.ts), since the server may not read GGUF files or
 * reach the Hub: the served file's GGUF metadata, size and time (for /api/show, /api/tags, /api/ps), and /api/pull's
 * download, fennec's Hugging Face client (hub/fetch-model.ts, as `fennec pull`) with each file's bytes reported.
 * @example createApp({ ...options, ollama: await ollamaServing(config.model, modelArgumentFlags(options)) })
 */
import { statSync } from "node:fs";
import { GgufValueType, type GgufFile } from "../gguf/gguf-file.ts";
import { openModelGguf } from "../gguf/model-source.ts";
import { fetchHubModel } from "../hub/fetch-model.ts";
import { repoInfo } from "../hub/hub-client.ts";
import { hubSettings } from "../hub/hub-settings.ts";
import { parseModelReference, pickGgufFiles } from "../hub/model-reference.ts";
import type { ModelArgumentFlags } from "../command-line/model-argument-flags.ts";
import type { GgufInfoValue, OllamaServing, PullEvent } from "../server/ollama/ollama-serving.ts";

type Scalar = number | string | boolean;

/** bigints (64-bit GGUF values) as numbers when exact, else as decimal text (JSON has no 64-bit integers) */
const scalar = (v: number | bigint | boolean | string): Scalar => (typeof v === "bigint" ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v);

/** 64-bit GGUF types: the only ones read as bigints */
const WIDE = new Set([GgufValueType.UINT64, GgufValueType.INT64]);

/**
 * The file's values as /api/show prints them. Arrays of other types are the parsed file's own (a 150k-token
 * vocabulary's tokens and merges, not copied: tens of ms on the main thread and tens of MiB per model before).
 */
function metadataOf(file: GgufFile): Map<string, GgufInfoValue> {
  const out = new Map<string, GgufInfoValue>();
  for (const [key, entry] of file.metadata) {
    if (entry.type === GgufValueType.ARRAY && typeof entry.value === "object") {
      const array = entry.value as { elementType: GgufValueType; values: (number | bigint | boolean | string)[] };
      out.set(key, WIDE.has(array.elementType) ? array.values.map(scalar) : (array.values as (number | boolean | string)[]));
    } else {
      out.set(key, scalar(entry.value as number | bigint | boolean | string));
    }
  }
  return out;
}

/** A Hub download for /api/pull, told as PullEvents (files already cached report all their bytes at once). */
function hubPull(flags: ModelArgumentFlags, log: (line: string) => void): NonNullable<OllamaServing["pull"]> {
  return async (model, onEvent: (event: PullEvent) => void) => {
    const ref = parseModelReference(model);
    if (!ref.ok) throw new Error(ref.error);
    const base = hubSettings(process.env, flags.downloadDir);
    const settings = flags.hfToken !== null ? { ...base, token: flags.hfToken } : base;
    const revision = flags.revision ?? "main";
    onEvent({ kind: "manifest" });
    const info = await repoInfo(settings, ref.value.repo, revision);
    const picked = pickGgufFiles(ref.value, info.files.map((f) => f.path));
    if (!picked.ok) throw new Error(picked.error);
    const files = picked.value.files.map((path) => info.files.find((f) => f.path === path)!);
    const digestOf = (name: string) => files.find((f) => f.path.split("/").pop() === name)?.sha256 ?? "";
    for (const f of files) onEvent({ kind: "file", digest: f.sha256 ?? "", totalBytes: f.size, completedBytes: 0 });
    const fetched = await fetchHubModel(ref.value, {
      revision, settings, log,
      progressBar: (label) => {
        const digest = digestOf(label.replace(/^downloading /, ""));
        return { update: (done, total) => onEvent({ kind: "file", digest, totalBytes: total, completedBytes: done }), done: () => {} };
      },
    });
    for (const f of files) onEvent({ kind: "file", digest: f.sha256 ?? "", totalBytes: f.size, completedBytes: f.size });
    onEvent({ kind: "verifying" });
    onEvent({ kind: "done", path: fetched.path });
  };
}

/** `modelPath` null = the embedded default model (no file, no size); `parsed`: the file read already (not read again). */
export async function ollamaServing(modelPath: string | null, flags: ModelArgumentFlags, log: (line: string) => void, parsed: GgufFile | null = null): Promise<OllamaServing> {
  const gguf = parsed !== null ? { ok: true as const, value: parsed } : await openModelGguf(modelPath);
  let stat: { size: number; mtimeMs: number } | null = null;
  try {
    if (modelPath !== null) stat = statSync(modelPath);
  } catch {
    // the engine has loaded the model already; a file that cannot be stat'ed only leaves size and time unknown (0)
  }
  return {
    ...(gguf.ok ? { metadata: metadataOf(gguf.value) } : {}),
    fileSizeBytes: stat?.size ?? 0,
    modifiedAtMs: stat?.mtimeMs ?? 0,
    pull: hubPull(flags, log),
  };
}
