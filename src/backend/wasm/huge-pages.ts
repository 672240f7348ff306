/**
 * Transparent huge pages for the kernels' WebAssembly memories. Decode streams every weight once per token; on 4 KiB
 * pages that is one TLB miss per 4 KiB of weights (an 8B model: over a million page walks per token), on 2 MiB pages
 * one per 2 MiB. Linux backs anonymous memory with huge pages only where madvise(MADV_HUGEPAGE) asked for them when
 * /sys/kernel/mm/transparent_hugepage/enabled is "madvise" (the common default), and JavaScriptCore does not ask, so
 * fennec does, through libc, over the memory's whole 4 GiB reservation before anything is written to it (pages faulted
 * later, as the memory grows, come as huge pages; khugepaged would collapse earlier ones only slowly).
 * llama.cpp gets the same effect differently: it maps the GGUF file (llama-mmap.cpp llama_mmap), whose page cache
 * the kernel may hold in large folios.
 * FENNEC_HUGE_PAGES=0 turns it off (to measure the difference). Anywhere it cannot work (not Linux, no libc.so.6)
 * it does nothing: the memory works the same on 4 KiB pages.
 */
import { dlopen, FFIType, ptr } from "bun:ffi";

const MADV_HUGEPAGE = 14; // linux/mman-common.h
const HUGE_PAGE_BYTES = 2 * 1024 * 1024;
const RESERVATION_BYTES = 4 * 1024 * 1024 * 1024; // wasm32: JSC reserves the whole 4 GiB range for a memory

type Madvise = (addr: bigint, length: bigint, advice: number) => number;
let madvise: Madvise | null | undefined;

function loadMadvise(): Madvise | null {
  if (process.platform !== "linux") return null;
  try {
    const libc = dlopen("libc.so.6", { madvise: { args: [FFIType.u64, FFIType.u64, FFIType.i32], returns: FFIType.i32 } });
    return libc.symbols.madvise as unknown as Madvise;
  } catch {
    return null;
  }
}

/** Asks for huge pages over `memory`'s reservation; true when the kernel accepted the advice. */
export function adviseHugePages(memory: WebAssembly.Memory): boolean {
  const setting = process.env.FENNEC_HUGE_PAGES;
  if (setting !== undefined && setting !== "0" && setting !== "1") throw new Error(`FENNEC_HUGE_PAGES=${setting}: expected 0 (4 KiB pages) or 1 (huge pages, the default)`);
  if (setting === "0") return false;
  if (madvise === undefined) madvise = loadMadvise();
  if (madvise === null) return false;
  const base = ptr(new Uint8Array(memory.buffer));
  const start = Math.ceil(base / HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES;
  return madvise(BigInt(start), BigInt(RESERVATION_BYTES - (start - base)), MADV_HUGEPAGE) === 0;
}
