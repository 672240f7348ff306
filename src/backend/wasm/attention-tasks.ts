/**
 * How one attention call is split into tasks over the thread pool (kernels/attention.ts): the int table the kernels
 * read, built from the batch's sequences alone (no memory, no kernels), so it can be unit-tested.
 * One task = (tile of up to tileRows query rows of one sequence, KV head, segment of up to segmentKeys keys); a tile
 * has a task per KV head and segment its rows reach (its first row's keys start first, its last row's end last), and
 * a row's segments before its first key are left out (sliding windows). A row with more than one segment writes a
 * partial result per (KV head, segment), which attention_merge combines: one merge per (row, KV head).
 * The table, in ints (base: its byte address in the kernels' memory):
 *   rowInfo [numRows, 4]    row in q / out, numKeys (the row's end key), its block table's byte address, first partial or -1
 *   block tables            each sequence's, in order
 *   tasks [numTasks, 4]     first rowInfo index, rows, KV head, segment
 *   merges [numMerges, 4]   row in q / out, KV head, its first partial, number of segments to merge
 *   first keys [numRows]    a bidirectional window only (its first keys are not end - window: the kernel reads them)
 * @example const plan = planAttentionTasks(sequences, geometry); const t = writeAttentionTasks(plan, sequences, base);
 */
import { attentionKeys, type AttentionSequence } from "../backend.ts";

/** What the split depends on besides the sequences. */
export interface AttentionGeometry {
  readonly numKvHeads: number;
  readonly blockSize: number;
  /** keys per task (the kernels' SEGMENT_KEYS) */
  readonly segmentKeys: number;
  /** query rows per tile (the kernels' TILE_ROWS) */
  readonly tileRows: number;
  readonly slidingWindow: number;
  readonly bidirectional: boolean;
}

/** The sizes of one call's table, and each row's keys [first, end). */
export interface AttentionTaskPlan {
  readonly geometry: AttentionGeometry;
  readonly numRows: number;
  readonly numTasks: number;
  readonly numMerges: number;
  /** partial results: (row, KV head, segment) of the rows with more than one segment */
  readonly numPartials: number;
  /** ints of all block tables */
  readonly tableInts: number;
  /** the first keys follow the merges (a bidirectional window) */
  readonly perRowFirst: boolean;
  readonly firsts: Int32Array; // [numRows]
  readonly ends: Int32Array; // [numRows]
  /** the whole table's ints */
  readonly numInts: number;
}

/** The written table and where its parts start (in ints). */
export interface AttentionTaskTable {
  readonly ints: Int32Array; // [numInts]
  readonly tasksAt: number;
  readonly mergesAt: number;
  /** -1 without per-row first keys */
  readonly firstKeysAt: number;
}

/** Counts the tasks, merges and partials of a call; throws when a block table is too short for its sequence. */
export function planAttentionTasks(sequences: readonly AttentionSequence[], geometry: AttentionGeometry): AttentionTaskPlan {
  const { numKvHeads, blockSize, segmentKeys, tileRows, slidingWindow, bidirectional } = geometry;
  const segmentsOf = (numKeys: number) => Math.ceil(numKeys / segmentKeys);
  let numRows = 0;
  for (const s of sequences) numRows += s.numRows;
  const firsts = new Int32Array(numRows); // [numRows]
  const ends = new Int32Array(numRows); // [numRows]
  let r = 0;
  for (const s of sequences) {
    for (let i = 0; i < s.numRows; i++, r++) [firsts[r], ends[r]] = attentionKeys(s, i, slidingWindow, bidirectional);
  }
  const firstSegmentOf = (row: number) => Math.floor(firsts[row]! / segmentKeys);
  let tableInts = 0;
  let numTasks = 0;
  let numPartials = 0;
  let numMerges = 0;
  let r0 = 0;
  for (const s of sequences) {
    const need = Math.ceil((s.startPos + s.numRows) / blockSize);
    if (s.blockTable.length < need) throw new Error(`attention: block table of ${s.blockTable.length} blocks, ${need} needed`);
    tableInts += s.blockTable.length;
    for (let i = 0; i < s.numRows; i += tileRows) {
      const last = r0 + Math.min(s.numRows, i + tileRows) - 1;
      numTasks += (segmentsOf(ends[last]!) - firstSegmentOf(r0 + i)) * numKvHeads;
    }
    for (let i = 0; i < s.numRows; i++) {
      const segments = segmentsOf(ends[r0 + i]!);
      if (segments > 1) {
        numPartials += segments * numKvHeads;
        numMerges += numKvHeads;
      }
    }
    r0 += s.numRows;
  }
  const perRowFirst = bidirectional && slidingWindow > 0;
  const numInts = numRows * 4 + tableInts + numTasks * 4 + numMerges * 4 + (perRowFirst ? numRows : 0);
  return { geometry, numRows, numTasks, numMerges, numPartials, tableInts, perRowFirst, firsts, ends, numInts };
}

/** The table of a plan, for the kernels' memory at byte address `base` (rowInfo holds absolute block table addresses). */
export function writeAttentionTasks(plan: AttentionTaskPlan, sequences: readonly AttentionSequence[], base: number): AttentionTaskTable {
  const { numKvHeads, segmentKeys, tileRows } = plan.geometry;
  const { firsts, ends, numRows } = plan;
  const segmentsOf = (numKeys: number) => Math.ceil(numKeys / segmentKeys);
  const firstSegmentOf = (row: number) => Math.floor(firsts[row]! / segmentKeys);
  const info = new Int32Array(plan.numInts); // [numInts]
  let tableAt = numRows * 4;
  const tasksAt = numRows * 4 + plan.tableInts;
  let taskAt = tasksAt;
  const mergesAt = tasksAt + plan.numTasks * 4;
  let mergeAt = mergesAt;
  const firstKeysAt = plan.perRowFirst ? mergesAt + plan.numMerges * 4 : -1;
  if (plan.perRowFirst) info.set(firsts, firstKeysAt);
  let r = 0;
  let partial = 0;
  for (const s of sequences) {
    info.set(s.blockTable, tableAt);
    const firstRow = r;
    for (let i = 0; i < s.numRows; i++, r++) {
      const numKeys = ends[r]!;
      const segments = segmentsOf(numKeys);
      info[r * 4] = s.rowStart + i;
      info[r * 4 + 1] = numKeys;
      info[r * 4 + 2] = base + tableAt * 4;
      info[r * 4 + 3] = segments > 1 ? partial : -1;
      if (segments > 1) {
        for (let h = 0; h < numKvHeads; h++) {
          info[mergeAt++] = s.rowStart + i;
          info[mergeAt++] = h;
          info[mergeAt++] = partial + h * segments + firstSegmentOf(r);
          info[mergeAt++] = segments - firstSegmentOf(r);
        }
        partial += segments * numKvHeads;
      }
    }
    for (let i = 0; i < s.numRows; i += tileRows) {
      const rows = Math.min(tileRows, s.numRows - i);
      for (let h = 0; h < numKvHeads; h++) {
        for (let seg = firstSegmentOf(firstRow + i); seg < segmentsOf(ends[firstRow + i + rows - 1]!); seg++) {
          info[taskAt++] = firstRow + i;
          info[taskAt++] = rows;
          info[taskAt++] = h;
          info[taskAt++] = seg;
        }
      }
    }
    tableAt += s.blockTable.length;
  }
  return { ints: info, tasksAt, mergesAt, firstKeysAt };
}
