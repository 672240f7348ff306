/**
 * A grow-only scratch region of the backend's heap (activation quants, int tables, thread scratch): ensure returns its
 * address, reallocating (contents lost) only when asked for more than it holds.
 * @example const at = new Scratch(heap).ensure(numBytes);
 */
import type { WasmHeap } from "./wasm-memory.ts";

export class Scratch {
  ptr = 0;
  bytes = 0;
  constructor(private readonly heap: WasmHeap) {}
  ensure(numBytes: number): number {
    if (numBytes > this.bytes) {
      if (this.bytes > 0) this.heap.free(this.ptr, this.bytes);
      this.bytes = Math.max(numBytes, this.bytes * 2);
      this.ptr = this.heap.alloc(this.bytes);
    }
    return this.ptr;
  }
}
