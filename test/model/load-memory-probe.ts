/**
 * Run as its own process by load-resident-memory.test.ts: opens the GGUF at argv[2] (the first part of a split
 * model brings the others), loads it over two wasm32 memories on 2 threads, and prints one JSON line with this
 * process's /proc/self/status figures (kB) before and after the load and the heap bytes the backend took. The GGUF
 * stays referenced until the figures are read, so a loader that touched its mapping would show it in RssFile.
 */
import { readFileSync } from "node:fs";
import { createBackend } from "../../src/backend/create-backend.ts";
import { openModelGguf } from "../../src/gguf/model-source.ts";
import { loadModel } from "../../src/model/load-model.ts";
import { Runner } from "../../src/model/runner.ts";

function status(): Record<string, number> {
  const fields: Record<string, number> = {};
  for (const line of readFileSync("/proc/self/status", "utf8").split("\n")) {
    const m = /^(VmHWM|VmRSS|RssAnon|RssFile):\s+(\d+) kB$/.exec(line);
    if (m !== null) fields[m[1]!] = Number(m[2]);
  }
  return fields;
}

const gguf = await openModelGguf(process.argv[2]!);
if (!gguf.ok) throw new Error(gguf.error);
const model = loadModel(gguf.value);
if (!model.ok) throw new Error(model.error);
const numLayers = model.value.config.numLayers;
const half = Math.floor(numLayers / 2);
const backend = await createBackend({
  kind: "wasm", threads: 2,
  memoryPlan: { numMemories: 2, layerMemory: Array.from({ length: numLayers }, (_, l) => (l < half ? 0 : 1)), firstLayer: [0, half], weightBytes: [0, 0], memoryBytes: 2 ** 32 },
});
const before = status();
const runner = new Runner(model.value.config, model.value.weights, backend);
const after = status();
const heapBytes = (backend as unknown as { memoryBytes: number }).memoryBytes;
console.log(JSON.stringify({ before, after, heapBytes, tensors: gguf.value.tensors.length, parts: gguf.value.parts?.length ?? 1 }));
runner.dispose();
