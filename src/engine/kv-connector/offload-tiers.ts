/**
 * Where offloaded KV blocks live: fixed-size slots in host memory outside the kernels' WASM memory (the `cpu`
 * backend), or in one scratch file (the `disk` backend, vllm/v1/simple_kv_offload/disk_backend.py). A slot holds one
 * block's bytes; which hash a slot holds is the offload pool's business (offload-connector.ts), not the tier's.
 *
 * The disk file follows vLLM's caveats exactly: path `${disk_path}.rank_${engine index}`, parent folders created, any file already
 * there unlinked first, then opened O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW (+O_DIRECT unless use_page_cache) with mode 0600
 * and sized with ftruncate; unlinked again on shutdown (its contents encode prompts). No fsync: a "completed" store
 * means the write returned, and the file is process-lifetime scratch, so a restart never reads an old file as valid
 * (it is unlinked before anything is read, and the slot index lives only in memory).
 */
import { closeSync, constants, ftruncateSync, mkdirSync, openSync, read, unlinkSync, write } from "node:fs";
import { dirname } from "node:path";

export interface OffloadTier {
  readonly kind: "cpu" | "disk";
  readonly numSlots: number;
  /** bytes a slot takes in the tier (the disk rounds a block up to the O_DIRECT alignment) */
  readonly slotBytes: number;
  /** copies `data` (one block) in; resolves when the write returned */
  write(slot: number, data: Uint8Array): Promise<void>;
  /** one block's bytes (a copy the caller may keep) */
  read(slot: number): Promise<Uint8Array>;
  /** releases memory / unlinks the file; idempotent */
  close(): void;
  /** the tier's own start-up log line, if it has one */
  describe?(): string;
}

/** Host memory: one buffer per slot, allocated on first use (8 GiB of default capacity is not taken up front). */
export class CpuTier implements OffloadTier {
  readonly kind = "cpu";
  private slots: (Uint8Array | null)[];

  constructor(readonly numSlots: number, readonly slotBytes: number) {
    this.slots = new Array<Uint8Array | null>(numSlots).fill(null);
  }

  write(slot: number, data: Uint8Array): Promise<void> {
    let buffer = this.slots[slot];
    if (buffer === undefined) return Promise.reject(new Error(`cpu tier: slot ${slot} out of range`));
    if (buffer === null) buffer = this.slots[slot] = new Uint8Array(this.slotBytes);
    buffer.set(data);
    return Promise.resolve();
  }

  read(slot: number): Promise<Uint8Array> {
    const buffer = this.slots[slot];
    if (!buffer) return Promise.reject(new Error(`cpu tier: slot ${slot} was never written`));
    return Promise.resolve(buffer);
  }

  close(): void {
    this.slots = [];
  }
}

/** O_DIRECT needs offsets and lengths in multiples of this */
const DIRECT_IO_ALIGNMENT = 4096;

/** The file vLLM's disk backend uses for a rank (fennec: the engine index, so pipeline stages never share one). */
export function diskTierPath(diskPath: string, rank = 0): string {
  return `${diskPath}.rank_${rank}`;
}

function unlinkIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}

/**
 * One scratch file of numSlots slots. Reads and writes are async (Bun's I/O threads), at most `bufferSlots` at a time
 * through page-aligned staging buffers (vLLM disk_buffer_slots), so O_DIRECT transfers are aligned.
 */
export class DiskTier implements OffloadTier {
  readonly kind = "disk";
  readonly path: string;
  readonly slotBytes: number;
  private readonly fd: number;
  private closed = false;
  /** [bufferSlots] staging buffers: free ones, and callers waiting for one */
  private readonly freeBuffers: Uint8Array[] = [];
  private readonly waiters: ((buffer: Uint8Array) => void)[] = [];

  constructor(diskPath: string, readonly numSlots: number, blockBytes: number, bufferSlots: number, readonly usePageCache: boolean, rank = 0) {
    this.path = diskTierPath(diskPath, rank);
    this.slotBytes = usePageCache ? blockBytes : Math.ceil(blockBytes / DIRECT_IO_ALIGNMENT) * DIRECT_IO_ALIGNMENT;
    mkdirSync(dirname(this.path), { recursive: true });
    // a file left by an earlier process (a crash) is never read: gone before this one is created
    unlinkIfPresent(this.path);
    const flags = constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | (usePageCache ? 0 : constants.O_DIRECT);
    this.fd = openSync(this.path, flags, 0o600);
    try {
      ftruncateSync(this.fd, numSlots * this.slotBytes);
    } catch (e) {
      closeSync(this.fd);
      unlinkIfPresent(this.path);
      throw e;
    }
    // one allocation per staging buffer: large ArrayBuffers are page-aligned, which O_DIRECT needs
    for (let i = 0; i < Math.max(1, bufferSlots); i++) this.freeBuffers.push(new Uint8Array(new ArrayBuffer(Math.max(this.slotBytes, 1 << 16)), 0, this.slotBytes));
  }

  /** the log line vLLM prints when the disk backend starts */
  describe(): string {
    return `DiskBackend: path=${this.path}, slots=${this.numSlots}, total=${((this.numSlots * this.slotBytes) / 1e9).toFixed(2)} GB, buf=${this.freeBuffers.length + this.waiters.length}x${this.slotBytes} bytes (page_cache=${this.usePageCache ? "True" : "False"})`;
  }

  private acquire(): Promise<Uint8Array> {
    const buffer = this.freeBuffers.pop();
    if (buffer) return Promise.resolve(buffer);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private releaseBuffer(buffer: Uint8Array): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(buffer);
    else this.freeBuffers.push(buffer);
  }

  async write(slot: number, data: Uint8Array): Promise<void> {
    if (this.closed) throw new Error("disk tier: closed");
    if (slot < 0 || slot >= this.numSlots) throw new Error(`disk tier: slot ${slot} out of range`);
    // copy at once: the caller's bytes may be reused as soon as this returns a promise
    const pending = data.slice();
    const buffer = await this.acquire();
    try {
      buffer.set(pending);
      if (pending.length < buffer.length) buffer.fill(0, pending.length);
      const bytesWritten = await new Promise<number>((resolve, reject) => {
        write(this.fd, buffer, 0, this.slotBytes, slot * this.slotBytes, (e, n) => (e ? reject(e) : resolve(n)));
      });
      if (bytesWritten !== this.slotBytes) throw new Error(`disk tier: short write (${bytesWritten} of ${this.slotBytes} bytes)`);
    } finally {
      this.releaseBuffer(buffer);
    }
  }

  async read(slot: number): Promise<Uint8Array> {
    if (this.closed) throw new Error("disk tier: closed");
    if (slot < 0 || slot >= this.numSlots) throw new Error(`disk tier: slot ${slot} out of range`);
    const buffer = await this.acquire();
    try {
      const bytesRead = await new Promise<number>((resolve, reject) => {
        read(this.fd, buffer, 0, this.slotBytes, slot * this.slotBytes, (e, n) => (e ? reject(e) : resolve(n)));
      });
      if (bytesRead !== this.slotBytes) throw new Error(`disk tier: short read (${bytesRead} of ${this.slotBytes} bytes)`);
      return buffer.slice();
    } finally {
      this.releaseBuffer(buffer);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    unlinkIfPresent(this.path);
    // transfers still running finish on the unlinked file (their results are dropped); the descriptor closes after them
    setTimeout(() => { try { closeSync(this.fd); } catch { /* already closed */ } }, 1000).unref?.();
  }
}
