/**
 * The LoRA adapters resident on the backend: --max-loras slots (vLLM's GPU LoRA slots, max_loras), each holding one
 * adapter's pairs as device buffers. A step's rows name a slot each (or -1 for the base model), and every adapted
 * matmul adds each row's own update (Backend.loraDelta; vLLM punica's per-token adapter index). Which adapter goes in
 * which slot is the engine's choice; this only uploads, frees and hands the forward the pairs of one matrix.
 * @example const slots = new LoraSlots(backend, 4, config.numLayers); slots.load(0, adapter); slots.pairs(3, "attn_q");
 */
import type { Backend, LoraPairBuffers } from "../backend/backend.ts";
import { loraScale, type LoraAdapter } from "../lora/lora-adapter.ts";
import { LORA_TARGETS, type LoraTargetName } from "../lora/lora-targets.ts";

/** The one line a backend without the per-row kernel gives (WebGPU, the split WASM backend). */
export function loraUnsupported(backend: Backend): string | null {
  return backend.loraDelta === undefined ? `LoRA adapters are not supported on the ${backend.name} backend (they run on the single-memory WASM backend); drop --enable-lora` : null;
}

/** [rows, cols] -> [cols, rows] */
function transpose(m: Float32Array, rows: number, cols: number): Float32Array {
  const t = new Float32Array(m.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = m[r * cols + c]!;
  return t;
}

const TARGET_INDEX = new Map(LORA_TARGETS.map((t, i) => [t.name, i]));

export class LoraSlots {
  /** [slot] the adapter there, or null */
  private readonly adapters: (LoraAdapter | null)[];
  /** [layer][target][slot] */
  private readonly table: (LoraPairBuffers | null)[][][];

  constructor(private readonly backend: Backend, readonly maxLoras: number, numLayers: number) {
    const why = loraUnsupported(backend);
    if (why !== null) throw new Error(why);
    if (!(Number.isInteger(maxLoras) && maxLoras >= 1)) throw new Error(`max_loras must be a positive integer (got ${maxLoras})`);
    this.adapters = Array.from({ length: maxLoras }, () => null);
    this.table = Array.from({ length: numLayers }, () => LORA_TARGETS.map(() => Array.from({ length: maxLoras }, () => null)));
  }

  /** Uploads `adapter` into `slot` (freeing what was there); userScale: llama.cpp's per-adapter scale, vLLM's is 1. */
  load(slot: number, adapter: LoraAdapter, userScale = 1): void {
    this.checkSlot(slot);
    this.unload(slot);
    const b = this.backend;
    adapter.layers.forEach((pairs, layer) => {
      if (layer >= this.table.length) throw new Error(`${adapter.source}: layer ${layer} is past the model's ${this.table.length}`);
      for (const [name, pair] of pairs) {
        const a = b.alloc(pair.a.length);
        b.write(a, pair.a);
        const bt = b.alloc(pair.b.length);
        b.write(bt, transpose(pair.b, pair.nOut, pair.rank));
        this.table[layer]![TARGET_INDEX.get(name)!]![slot] = { a, bt, rank: pair.rank, scale: loraScale(adapter.alpha, pair.rank, userScale) };
      }
    });
    this.adapters[slot] = adapter;
  }

  /** Frees the slot's buffers (nothing when it is empty). */
  unload(slot: number): void {
    this.checkSlot(slot);
    if (this.adapters[slot] === null) return;
    for (const layer of this.table) {
      for (const row of layer) {
        const p = row[slot];
        if (p == null) continue;
        this.backend.free(p.a);
        this.backend.free(p.bt);
        row[slot] = null;
      }
    }
    this.adapters[slot] = null;
  }

  /** The adapter in `slot`, or null. */
  adapter(slot: number): LoraAdapter | null {
    return this.adapters[slot] ?? null;
  }

  /** [slot] the pairs of layer `layer`'s `target` (null: that slot leaves the matrix alone). */
  pairs(layer: number, target: LoraTargetName): readonly (LoraPairBuffers | null)[] {
    return this.table[layer]![TARGET_INDEX.get(target)!]!;
  }

  dispose(): void {
    for (let s = 0; s < this.maxLoras; s++) this.unload(s);
  }

  private checkSlot(slot: number): void {
    if (!(Number.isInteger(slot) && slot >= 0 && slot < this.maxLoras)) throw new Error(`LoRA slot ${slot} is outside 0..${this.maxLoras - 1} (max_loras ${this.maxLoras})`);
  }
}
