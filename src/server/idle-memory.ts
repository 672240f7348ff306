/**
 * Gives the process's memory back once the server holds no model. A full collection frees the unloaded models' objects
 * but not what serving left behind: JSC keeps every function it ran compiled (bytecode, baseline and optimized JIT
 * code) and the heap's capacity from the request peak, and the allocator keeps the pages those sat on. Measured with
 * /proc/<pid>/smaps (three models loaded and unloaded, compiled binary): after Bun.gc(true) ~19-30 MiB more anonymous
 * memory than at start stayed, in mimalloc's arena and JSC's JIT region; after this ~4 MiB. Bun.shrink() is JSC's
 * VM::shrinkFootprintWhenIdle (JavaScriptCore/runtime/VM.cpp): once the current JS turn ends it deletes all compiled
 * code, runs a full synchronous collection and releases the allocator's free pages. Code is compiled again as it runs
 * (tens of ms over the next requests); what stays is the binary's code pages the loads touched, file-backed and clean.
 * @example if (noModelLoaded) releaseIdleMemory();
 */

/** Collects and shrinks the heap once the current turn ends: call it only while no model runs (it stops this thread). */
export function releaseIdleMemory(): void {
  Bun.shrink();
}
