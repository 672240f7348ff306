/**
 * Preloaded into the server under test (BUN_OPTIONS="--preload bench/event-loop-probe.ts", which the compiled binary
 * honours too) by bench/many-models.ts: a 1 ms timer on the main thread, and one stderr line per gap over 3 ms with
 * the ms the main thread ran (busy: the stall is its own work) and waited for a CPU (the machine was busy) over that
 * gap, from /proc/thread-self/schedstat. The bench reads the lines between a model's "loading" and "loaded" lines.
 *   [event-loop] gap 12.3 ms ran 10.1 ms waited 1.9 ms
 */
import { readFileSync } from "node:fs";
import { isMainThread } from "node:worker_threads";

const REPORT_OVER_MS = 3;

if (isMainThread) {
  const sched = (): [number, number] => {
    const [run, wait] = readFileSync("/proc/thread-self/schedstat", "utf8").split(" ").map((x) => Number(x) / 1e6);
    return [run!, wait!];
  };
  let last = performance.now();
  let [ran, waited] = sched();
  const timer = setInterval(() => {
    const now = performance.now();
    const [run, wait] = sched();
    if (now - last > REPORT_OVER_MS) process.stderr.write(`[event-loop] gap ${(now - last).toFixed(1)} ms ran ${(run - ran).toFixed(1)} ms waited ${(wait - waited).toFixed(1)} ms\n`);
    last = performance.now();
    [ran, waited] = sched();
  }, 1);
  // the probe must not keep the server alive once it stops
  timer.unref();
}
