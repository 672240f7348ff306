/**
 * The WASM backend's attention task table (src/backend/wasm/attention-tasks.ts), with no kernels: a hand-worked
 * case, then random batches checked against what the kernels rely on (every (row, KV head, segment) of a row's keys
 * in exactly one task of its tile, merges over the row's own partials, rowInfo pointing at its block table).
 */
import { describe, expect, test } from "bun:test";
import { attentionKeys, type AttentionSequence } from "../../src/backend/backend.ts";
import { planAttentionTasks, writeAttentionTasks, type AttentionGeometry } from "../../src/backend/wasm/attention-tasks.ts";

const BASE = 4096; // byte address the table is written for

function blockTable(numBlocks: number, first: number): Int32Array {
  return Int32Array.from({ length: numBlocks }, (_, i) => first + i);
}

function quads(ints: Int32Array, at: number, count: number): number[][] {
  return Array.from({ length: count }, (_, i) => Array.from(ints.subarray(at + i * 4, at + i * 4 + 4)));
}

describe("attention task table, worked by hand", () => {
  // one sequence of 5 rows from position 0, 2 keys per segment, tiles of 2 rows, one KV head: row i has i + 1 keys
  const seq: AttentionSequence = { rowStart: 0, numRows: 5, startPos: 0, blockTable: blockTable(2, 7) };
  const geometry: AttentionGeometry = { numKvHeads: 1, blockSize: 4, segmentKeys: 2, tileRows: 2, slidingWindow: 0, bidirectional: false };

  test("causal: a task per tile and segment its last row reaches, a merge per multi-segment row", () => {
    const plan = planAttentionTasks([seq], geometry);
    expect([plan.numTasks, plan.numMerges, plan.numPartials]).toEqual([6, 3, 7]);
    const t = writeAttentionTasks(plan, [seq], BASE);
    // tiles: rows 0-1 (keys up to 2: segment 0), rows 2-3 (up to 4: segments 0, 1), row 4 (5 keys: segments 0-2)
    expect(quads(t.ints, t.tasksAt, 6)).toEqual([[0, 2, 0, 0], [2, 2, 0, 0], [2, 2, 0, 1], [4, 1, 0, 0], [4, 1, 0, 1], [4, 1, 0, 2]]);
    // rows 2 and 3 have 2 partials each, row 4 three: (row, head, first partial, segments)
    expect(quads(t.ints, t.mergesAt, 3)).toEqual([[2, 0, 0, 2], [3, 0, 2, 2], [4, 0, 4, 3]]);
    const tableAddress = BASE + 5 * 4 * 4; // right after rowInfo [5, 4]
    expect(quads(t.ints, 0, 5)).toEqual([[0, 1, tableAddress, -1], [1, 2, tableAddress, -1], [2, 3, tableAddress, 0], [3, 4, tableAddress, 2], [4, 5, tableAddress, 4]]);
    expect(Array.from(t.ints.subarray(20, 22))).toEqual([7, 8]);
    expect(t.firstKeysAt).toBe(-1);
  });

  test("a sliding window leaves out the segments before a row's first key", () => {
    const plan = planAttentionTasks([seq], { ...geometry, slidingWindow: 3 });
    const t = writeAttentionTasks(plan, [seq], BASE);
    // row 4 sees keys [2, 5): segments 1 and 2 only; rows 2-3 still start at segment 0 (row 2 sees [0, 3))
    expect(quads(t.ints, t.tasksAt, plan.numTasks)).toEqual([[0, 2, 0, 0], [2, 2, 0, 0], [2, 2, 0, 1], [4, 1, 0, 1], [4, 1, 0, 2]]);
    expect(quads(t.ints, t.mergesAt, 3)).toEqual([[2, 0, 0, 2], [3, 0, 2, 2], [4, 0, 5, 2]]);
  });

  test("a bidirectional window appends every row's first key", () => {
    const plan = planAttentionTasks([seq], { ...geometry, slidingWindow: 2, bidirectional: true });
    const t = writeAttentionTasks(plan, [seq], BASE);
    expect(t.firstKeysAt).toBe(t.mergesAt + plan.numMerges * 4);
    expect(Array.from(t.ints.subarray(t.firstKeysAt))).toEqual([0, 0, 1, 2, 3]); // |t - p| <= 1
  });

  test("a block table too short for its sequence is an error", () => {
    expect(() => planAttentionTasks([{ ...seq, blockTable: blockTable(1, 0) }], geometry)).toThrow("block table of 1 blocks, 2 needed");
  });
});

/** A small deterministic generator (mulberry32), so a failure reproduces. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("attention task table, random batches", () => {
  test.each(Array.from({ length: 40 }, (_, i) => i))("seed %d: every row's segments in exactly one task, merges over its partials", (seed) => {
    const next = rng(seed + 1);
    const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
    const bidirectional = next() < 0.3;
    const geometry: AttentionGeometry = {
      numKvHeads: int(1, 3), blockSize: int(1, 8), segmentKeys: int(1, 6), tileRows: int(1, 5),
      slidingWindow: next() < 0.5 ? 0 : int(1, 12), bidirectional,
    };
    const sequences: AttentionSequence[] = [];
    let rowStart = 0;
    let firstBlock = 0;
    for (let n = int(1, 4); n > 0; n--) {
      const numRows = int(1, 12);
      const startPos = bidirectional ? 0 : int(0, 20);
      const numBlocks = Math.ceil((startPos + numRows) / geometry.blockSize) + int(0, 2);
      sequences.push({ rowStart, numRows, startPos, blockTable: blockTable(numBlocks, firstBlock) });
      rowStart += numRows + int(0, 2); // rows of q / out need not be contiguous across sequences
      firstBlock += numBlocks;
    }
    const plan = planAttentionTasks(sequences, geometry);
    const t = writeAttentionTasks(plan, sequences, BASE);
    const { numKvHeads, segmentKeys, tileRows } = geometry;
    const tasks = quads(t.ints, t.tasksAt, plan.numTasks);
    const merges = quads(t.ints, t.mergesAt, plan.numMerges);
    expect(t.ints.length).toBe(plan.numInts);

    // rowInfo, per row of every sequence
    let r = 0;
    const seqOfRow: number[] = [];
    const covered = new Map<string, number>();
    const partialOwner = new Map<number, string>();
    sequences.forEach((s, si) => {
      for (let i = 0; i < s.numRows; i++, r++) {
        seqOfRow.push(si);
        const [first, end] = attentionKeys(s, i, geometry.slidingWindow, bidirectional);
        const [row, numKeys, tableAddress, firstPartial] = quads(t.ints, r * 4, 1)[0]!;
        expect(row).toBe(s.rowStart + i);
        expect(numKeys).toBe(end);
        const at = (tableAddress! - BASE) / 4;
        expect(Array.from(t.ints.subarray(at, at + s.blockTable.length))).toEqual(Array.from(s.blockTable));
        const segments = Math.ceil(end / segmentKeys);
        if (segments === 1) expect(firstPartial).toBe(-1);
        for (let h = 0; h < numKvHeads; h++) {
          for (let seg = Math.floor(first / segmentKeys); seg < segments; seg++) covered.set(`${r}/${h}/${seg}`, 0);
          if (segments > 1) for (let seg = 0; seg < segments; seg++) partialOwner.set(firstPartial! + h * segments + seg, `${r}/${h}`);
        }
        if (bidirectional && geometry.slidingWindow > 0) expect(t.ints[t.firstKeysAt + r]).toBe(first);
      }
    });
    expect(partialOwner.size).toBe(plan.numPartials); // no partial shared by two (row, head)s

    for (const [firstRow, rows, h, seg] of tasks) {
      expect(rows).toBeGreaterThanOrEqual(1);
      expect(rows).toBeLessThanOrEqual(tileRows);
      for (let k = firstRow!; k < firstRow! + rows!; k++) {
        expect(seqOfRow[k]).toBe(seqOfRow[firstRow!]!); // a tile never crosses sequences
        const key = `${k}/${h}/${seg}`;
        if (covered.has(key)) covered.set(key, covered.get(key)! + 1);
      }
    }
    for (const [key, count] of covered) expect(`${key}: ${count}`).toBe(`${key}: 1`);

    // each multi-segment row has one merge per KV head, over partials that are its own
    expect(merges.length).toBe([...new Set(partialOwner.values())].length);
    for (const [row, h, firstPartial, count] of merges) {
      const r = Array.from({ length: plan.numRows }, (_, k) => k).find((k) => t.ints[k * 4] === row)!;
      for (let p = firstPartial!; p < firstPartial! + count!; p++) expect(partialOwner.get(p)).toBe(`${r}/${h}`);
      const [first, end] = [plan.firsts[r]!, plan.ends[r]!];
      expect(count).toBe(Math.ceil(end / segmentKeys) - Math.floor(first / segmentKeys));
    }
  });
});
