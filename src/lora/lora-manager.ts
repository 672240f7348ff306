/**
 * The engine's adapters (vLLM's LRUCacheWorkerLoRAManager and the scheduler's max_loras rule, worker side): the known
 * adapters by name (--lora-modules, runtime loads), the parsed ones in host memory (at most --max-cpu-loras, least
 * recently used dropped first and read again from their file when next needed), and which one sits in each of the
 * kernels' --max-loras slots (a slot whose adapter this step does not use is reused, least recently used first).
 * @example const slots = manager.slotsFor(new Set(["sql"])); // Map { "sql" => 0 }
 */
import type { LoraConfig } from "../config/lora-config.ts";
import type { ModelConfig } from "../model/model-config.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { LoraAdapter } from "./lora-adapter.ts";
import { readLoraAdapter } from "./read-lora-adapter.ts";

/** Where adapters are uploaded (model/runner.ts Runner: its LoRA slots). */
export interface LoraSlotHost {
  enableLora?(maxLoras: number): void;
  loadLora?(slot: number, adapter: LoraAdapter): void;
  unloadLora?(slot: number): void;
}

export class LoraManager {
  /** name -> path and lora_int_id of every adapter requests may name */
  private readonly known = new Map<string, { readonly path: string; readonly id: number }>();
  /** parsed adapters, least recently used first (Map order) */
  private readonly cpu = new Map<string, LoraAdapter>();
  /** [slot] the adapter's name there, or null */
  private readonly slots: (string | null)[];
  /** [slot] when it was last used (a counter) */
  private readonly slotUsed: number[];
  private useCounter = 0;

  constructor(readonly config: LoraConfig, private readonly model: ModelConfig, private readonly host: LoraSlotHost) {
    if (host.enableLora === undefined || host.loadLora === undefined || host.unloadLora === undefined) throw new Error("this model runner cannot serve LoRA adapters");
    host.enableLora(config.maxLoras);
    this.slots = Array.from({ length: config.maxLoras }, () => null);
    this.slotUsed = Array.from({ length: config.maxLoras }, () => 0);
  }

  /**
   * Reads and checks the adapter at `path` under `name` with the server's lora_int_id `id` (replacing an adapter of
   * that name: vLLM's load_inplace); one line on failure.
   */
  register(name: string, path: string, id: number): Result<LoraAdapter> {
    const adapter = readLoraAdapter(path, { config: this.model, maxLoraRank: this.config.maxLoraRank });
    if (!adapter.ok) return adapter;
    this.unregister(name);
    this.known.set(name, { path, id });
    this.remember(name, adapter.value);
    return adapter;
  }

  /** Forgets an adapter (and frees its slot); false when the name is unknown. */
  unregister(name: string): boolean {
    if (!this.known.delete(name)) return false;
    this.cpu.delete(name);
    const slot = this.slots.indexOf(name);
    if (slot >= 0) {
      this.host.unloadLora!(slot);
      this.slots[slot] = null;
    }
    return true;
  }

  has(name: string): boolean {
    return this.known.has(name);
  }

  /** the adapter's lora_int_id (vLLM LoRARequest.adapter_id), null when the name is unknown */
  idOf(name: string): number | null {
    return this.known.get(name)?.id ?? null;
  }

  /** the slot of each adapter a step uses (at most max_loras names: the scheduler's rule), uploading what is missing */
  slotsFor(names: ReadonlySet<string>): Result<Map<string, number>> {
    if (names.size > this.slots.length) return err(`a step holds ${names.size} LoRA adapters, max_loras is ${this.slots.length}`);
    const result = new Map<string, number>();
    const stamp = ++this.useCounter;
    for (const name of names) {
      const slot = this.slots.indexOf(name);
      if (slot >= 0) {
        result.set(name, slot);
        this.slotUsed[slot] = stamp;
      }
    }
    for (const name of names) {
      if (result.has(name)) continue;
      const adapter = this.parsed(name);
      if (!adapter.ok) return adapter;
      // an empty slot, else the least recently used one this step does not use
      let slot = this.slots.indexOf(null);
      if (slot < 0) {
        slot = -1;
        for (let s = 0; s < this.slots.length; s++) if (this.slotUsed[s] !== stamp && (slot < 0 || this.slotUsed[s]! < this.slotUsed[slot]!)) slot = s;
      }
      this.host.loadLora!(slot, adapter.value);
      this.slots[slot] = name;
      this.slotUsed[slot] = stamp;
      result.set(name, slot);
    }
    return ok(result);
  }

  /** The adapter from host memory, or read again from its file (it was dropped by --max-cpu-loras). */
  private parsed(name: string): Result<LoraAdapter> {
    const hit = this.cpu.get(name);
    if (hit !== undefined) {
      this.remember(name, hit);
      return ok(hit);
    }
    const path = this.known.get(name)?.path;
    if (path === undefined) return err(`LoRA adapter ${name} is not loaded`);
    const adapter = readLoraAdapter(path, { config: this.model, maxLoraRank: this.config.maxLoraRank });
    if (!adapter.ok) return adapter;
    this.remember(name, adapter.value);
    return adapter;
  }

  private remember(name: string, adapter: LoraAdapter): void {
    this.cpu.delete(name);
    this.cpu.set(name, adapter);
    while (this.cpu.size > this.config.maxCpuLoras) this.cpu.delete(this.cpu.keys().next().value!);
  }
}
