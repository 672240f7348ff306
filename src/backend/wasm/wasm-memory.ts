/**
 * The one shared WebAssembly.Memory of the kernels and every pool worker, and its allocator. The host owns all
 * allocation (kernels never allocate): a bump pointer from the kernels' heap base, growing the memory on demand,
 * plus exact-size free lists so buffers freed and re-allocated each step are reused.
 * @example const heap = new WasmHeap(); const ptr = heap.alloc(1024); heap.free(ptr, 1024);
 */
import { adviseHugePages } from "./huge-pages.ts";

const PAGE_BYTES = 65536;
const MAX_PAGES = 65536; // 4 GiB: wasm32
const ALIGN_BYTES = 64; // one cache line, and v128 alignment

export class WasmHeap {
  readonly memory: WebAssembly.Memory;
  private top: number;
  private readonly freeLists = new Map<number, number[]>();
  private f32: Float32Array;
  private u8: Uint8Array;
  private i32: Int32Array;

  constructor(initialPages = 256) {
    this.memory = new WebAssembly.Memory({ initial: initialPages, maximum: MAX_PAGES, shared: true });
    adviseHugePages(this.memory);
    this.top = 0;
    this.f32 = new Float32Array(this.memory.buffer);
    this.u8 = new Uint8Array(this.memory.buffer);
    this.i32 = new Int32Array(this.memory.buffer);
  }

  /** Starts allocation after the kernels' static data (called once the module is instantiated). */
  setBase(heapBase: number): void {
    this.top = Math.max(this.top, align(heapBase));
  }

  /** A 64-byte aligned block of `numBytes`; its contents are not cleared when reused. */
  alloc(numBytes: number): number {
    const size = align(Math.max(numBytes, 1));
    const reuse = this.freeLists.get(size);
    if (reuse !== undefined && reuse.length > 0) return reuse.pop()!;
    const ptr = this.top;
    const end = ptr + size;
    if (end > this.memory.buffer.byteLength) {
      const needPages = Math.ceil(end / PAGE_BYTES);
      if (needPages > MAX_PAGES) throw new Error(`wasm backend: out of memory (${(end / 2 ** 30).toFixed(2)} GiB needed, wasm32 holds 4 GiB)`);
      const current = this.memory.buffer.byteLength / PAGE_BYTES;
      this.memory.grow(Math.max(needPages - current, Math.min(current, MAX_PAGES - current, 4096)));
    }
    this.top = end;
    return ptr;
  }

  free(ptr: number, numBytes: number): void {
    const size = align(Math.max(numBytes, 1));
    const list = this.freeLists.get(size);
    if (list === undefined) this.freeLists.set(size, [ptr]);
    else list.push(ptr);
  }

  /** Views of the current buffer (re-created after the memory grows). */
  get floats(): Float32Array {
    if (this.f32.buffer.byteLength !== this.memory.buffer.byteLength) this.refresh();
    return this.f32;
  }

  get bytes(): Uint8Array {
    if (this.u8.buffer.byteLength !== this.memory.buffer.byteLength) this.refresh();
    return this.u8;
  }

  get ints(): Int32Array {
    if (this.i32.buffer.byteLength !== this.memory.buffer.byteLength) this.refresh();
    return this.i32;
  }

  get usedBytes(): number {
    return this.top;
  }

  /** Bytes of the blocks handed out and not freed (usedBytes less the free lists). */
  get liveBytes(): number {
    let free = 0;
    for (const [size, list] of this.freeLists) free += size * list.length;
    return this.top - free;
  }

  private refresh(): void {
    this.f32 = new Float32Array(this.memory.buffer);
    this.u8 = new Uint8Array(this.memory.buffer);
    this.i32 = new Int32Array(this.memory.buffer);
  }
}

/** What `alloc(numBytes)` takes from the heap (blocks are 64-byte aligned). */
export function allocatedBytes(numBytes: number): number {
  return align(Math.max(numBytes, 1));
}

function align(n: number): number {
  return Math.ceil(n / ALIGN_BYTES) * ALIGN_BYTES;
}
