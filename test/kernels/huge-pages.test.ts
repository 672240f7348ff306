// The kernels' memories ask Linux for transparent huge pages (src/backend/wasm/huge-pages.ts): checked on the real
// kernel through /proc, in subprocesses so each starts from its own count. Skipped where the machine's THP mode is
// "never" (then no process can get them) or the OS is not Linux.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";

const THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled";
const thpPossible = process.platform === "linux" && existsSync(THP_MODE) && !readFileSync(THP_MODE, "utf8").includes("[never]");

/** MiB of huge pages a fresh process gains by filling 256 MiB of a WasmHeap block. */
async function hugeMiBAfterFill(env: Record<string, string>): Promise<number> {
  const script = `
    import { WasmHeap } from "${import.meta.dir}/../../src/backend/wasm/wasm-memory.ts";
    import { readFileSync } from "node:fs";
    const huge = () => Number(/AnonHugePages:\\s+(\\d+)/.exec(readFileSync("/proc/self/smaps_rollup", "utf8"))[1]) / 1024;
    const before = huge();
    const heap = new WasmHeap();
    const bytes = 256 * 1024 * 1024;
    const p = heap.alloc(bytes);
    heap.bytes.fill(7, p, p + bytes);
    console.log(huge() - before);`;
  const proc = Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, ...env }, stdout: "pipe", stderr: "inherit" });
  const out = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  return Number(out.trim());
}

describe.skipIf(!thpPossible)("huge pages for the kernels' memories", () => {
  test("a filled heap block lies mostly on huge pages", async () => {
    expect(await hugeMiBAfterFill({})).toBeGreaterThanOrEqual(128);
  }, 60_000);

  test("FENNEC_HUGE_PAGES=0 leaves it on 4 KiB pages", async () => {
    expect(await hugeMiBAfterFill({ FENNEC_HUGE_PAGES: "0" })).toBeLessThan(16);
  }, 60_000);
});
