/** The loading progress bar (util/progress.ts): drawn only on a TTY and only for big totals, throttled, cleared at the end. */
import { expect, test } from "bun:test";
import { createProgressBar, type ProgressStream } from "../../src/util/progress.ts";

const MIB = 1024 * 1024;

function fakeStream(isTTY: boolean): ProgressStream & { text: string } {
  return { isTTY, text: "", write(t: string) { this.text += t; return true; } };
}

test("on a TTY: one redrawn line with the label, percent and MiB, cleared by done()", () => {
  const stream = fakeStream(true);
  const bar = createProgressBar("loading m", { stream, minTotal: 0, widthChars: 10, redrawIntervalMs: 0 });
  bar.update(50 * MIB, 200 * MIB);
  bar.update(200 * MIB, 200 * MIB);
  bar.done();
  expect(stream.text).toBe("\rloading m [###-------]  25% 50/200 MiB\rloading m [##########] 100% 200/200 MiB\r\x1b[2K");
});

test("not a TTY (a pipe, CI): nothing at all", () => {
  const stream = fakeStream(false);
  const bar = createProgressBar("loading", { stream, minTotal: 0 });
  bar.update(1, 2);
  bar.done();
  expect(stream.text).toBe("");
});

test("a small model (below minTotal) draws nothing, a large one does", () => {
  const small = fakeStream(true);
  const bar = createProgressBar("loading", { stream: small });
  bar.update(MIB, MIB); // the default threshold is 64 MiB
  bar.done();
  expect(small.text).toBe("");
  const large = fakeStream(true);
  createProgressBar("loading", { stream: large }).update(100 * MIB, 100 * MIB);
  expect(large.text).toContain("100%");
});

test("redraws are throttled, but the final 100% always shows", () => {
  const stream = fakeStream(true);
  const bar = createProgressBar("x", { stream, minTotal: 0, redrawIntervalMs: 60_000 });
  for (let i = 1; i <= 100; i++) bar.update(i, 100);
  expect(stream.text.split("\r").filter((s) => s !== "").length).toBe(2); // the first and the last
  expect(stream.text).toContain("100%");
});

test("counts other than bytes: the format option writes them (bench:throughput's finished requests)", () => {
  const stream = fakeStream(true);
  const bar = createProgressBar("concurrency 8", { stream, minTotal: 0, widthChars: 4, redrawIntervalMs: 0, format: (d, t) => `${d}/${t} requests` });
  bar.update(8, 32);
  expect(stream.text).toBe("\rconcurrency 8 [#---]  25% 8/32 requests");
});
