/**
 * The bytes of CPython's `pickle.dumps(obj, protocol=5)` (pickle.HIGHEST_PROTOCOL since Python 3.8) for the few value
 * kinds a vLLM block-hash key holds: vLLM's default `--prefix-caching-hash-algo sha256` hashes these bytes
 * (vllm/utils/hashing.py::sha256), so a consumer can only rebuild vLLM's hashes from the same bytes.
 *
 * Follows CPython Modules/_pickle.c: `save_long` (BININT1 / BININT2 / BININT / LONG1), `save_bytes` (SHORT_BINBYTES /
 * BINBYTES + MEMOIZE), `save_unicode` (SHORT_BINUNICODE / BINUNICODE + MEMOIZE), `save_tuple` (EMPTY_TUPLE, TUPLE1-3
 * or MARK .. TUPLE, then MEMOIZE), and the protocol-4 framing (`_Pickler_OpcodeBoundary`: a frame is closed after the
 * save of an object once it holds 64 KiB; `_Pickler_CommitFrame`: a frame under 4 bytes gets no FRAME header).
 *
 * Not covered (never in a block-hash key): floats, dicts, lists, and objects referenced twice (CPython writes a memo
 * GET for the second reference to the same object; every value here is written as a fresh object).
 */

/** A Python value as a block-hash key holds it: None, int, str, bytes, or a tuple of those (a JS array). */
export type PyValue = null | number | bigint | string | Uint8Array | readonly PyValue[];

const PROTO = 0x80;
const FRAME = 0x95;
const STOP = 0x2e;
const MEMOIZE = 0x94;
const NONE = 0x4e;
const BININT = 0x4a;
const BININT1 = 0x4b;
const BININT2 = 0x4d;
const LONG1 = 0x8a;
const LONG4 = 0x8b;
const SHORT_BINBYTES = 0x43;
const BINBYTES = 0x42;
const SHORT_BINUNICODE = 0x8c;
const BINUNICODE = 0x58;
const MARK = 0x28;
const TUPLE = 0x74;
const EMPTY_TUPLE = 0x29;
const TUPLE_N = [0, 0x85, 0x86, 0x87] as const;

const PROTOCOL = 5;
/** _pickle.c FRAME_SIZE_TARGET / FRAME_SIZE_MIN */
const FRAME_SIZE_TARGET = 64 * 1024;
const FRAME_SIZE_MIN = 4;

/** Appends bytes and splits them into protocol-4 frames at object boundaries, as the C pickler does. */
class FramedWriter {
  private readonly out: number[] = [PROTO, PROTOCOL];
  private frame: number[] = [];

  byte(b: number): void {
    this.frame.push(b);
  }

  bytes(data: ArrayLike<number>): void {
    for (let i = 0; i < data.length; i++) this.frame.push(data[i]!);
  }

  uint32le(n: number): void {
    this.frame.push(n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff);
  }

  /** after the save of one object (_Pickler_OpcodeBoundary) */
  boundary(): void {
    if (this.frame.length >= FRAME_SIZE_TARGET) this.commit();
  }

  commit(): void {
    if (this.frame.length >= FRAME_SIZE_MIN) {
      let len = this.frame.length;
      this.out.push(FRAME);
      for (let i = 0; i < 8; i++) {
        this.out.push(len % 256);
        len = Math.floor(len / 256);
      }
    }
    for (const b of this.frame) this.out.push(b);
    this.frame = [];
  }

  finish(): Uint8Array {
    this.byte(STOP);
    this.commit();
    return Uint8Array.from(this.out);
  }
}

/** Little-endian two's complement in the fewest bytes (_PyLong_AsByteArray as save_long sizes it). */
function longBytes(value: bigint): number[] {
  const magnitude = value < 0n ? -value : value;
  const numBits = magnitude === 0n ? 0 : magnitude.toString(2).length;
  let numBytes = (numBits >> 3) + 1;
  const mod = 1n << BigInt(numBytes * 8);
  let v = value < 0n ? mod + value : value;
  const out: number[] = [];
  for (let i = 0; i < numBytes; i++) {
    out.push(Number(v & 0xffn));
    v >>= 8n;
  }
  // save_long: a negative number whose top byte is only sign extension drops it
  if (value < 0n && numBytes > 1 && out[numBytes - 1] === 0xff && (out[numBytes - 2]! & 0x80) !== 0) {
    out.pop();
    numBytes--;
  }
  return out;
}

function saveInt(w: FramedWriter, value: number | bigint): void {
  const big = typeof value === "bigint" ? value : BigInt(value);
  if (big >= -0x80000000n && big <= 0x7fffffffn) {
    const n = Number(big);
    if (n >= 0 && n <= 0xff) {
      w.byte(BININT1);
      w.byte(n);
    } else if (n >= 0 && n <= 0xffff) {
      w.byte(BININT2);
      w.byte(n & 0xff);
      w.byte(n >> 8);
    } else {
      w.byte(BININT);
      w.uint32le(n >>> 0);
    }
    return;
  }
  const bytes = longBytes(big);
  if (bytes.length < 256) {
    w.byte(LONG1);
    w.byte(bytes.length);
  } else {
    w.byte(LONG4);
    w.uint32le(bytes.length);
  }
  w.bytes(bytes);
}

function saveSized(w: FramedWriter, shortOp: number, longOp: number, data: Uint8Array): void {
  if (data.length < 256) {
    w.byte(shortOp);
    w.byte(data.length);
  } else {
    w.byte(longOp);
    w.uint32le(data.length);
  }
  w.bytes(data);
  w.byte(MEMOIZE);
}

function save(w: FramedWriter, value: PyValue): void {
  if (value === null) w.byte(NONE);
  else if (typeof value === "number" || typeof value === "bigint") {
    if (typeof value === "number" && !Number.isSafeInteger(value)) throw new Error(`pickle: ${value} is not an integer`);
    saveInt(w, value);
  } else if (typeof value === "string") saveSized(w, SHORT_BINUNICODE, BINUNICODE, new TextEncoder().encode(value));
  else if (value instanceof Uint8Array) saveSized(w, SHORT_BINBYTES, BINBYTES, value);
  else if (value.length === 0) w.byte(EMPTY_TUPLE);
  else if (value.length <= 3) {
    for (const item of value) save(w, item);
    w.byte(TUPLE_N[value.length]!);
    w.byte(MEMOIZE);
  } else {
    w.byte(MARK);
    for (const item of value) save(w, item);
    w.byte(TUPLE);
    w.byte(MEMOIZE);
  }
  w.boundary();
}

/**
 * `pickle.dumps(value, protocol=5)`; JS arrays are Python tuples.
 * @example pickleDumps(["42"]) // 80 05 95 08 00.. 8c 02 34 32 94 85 94 2e
 */
export function pickleDumps(value: PyValue): Uint8Array {
  const w = new FramedWriter();
  save(w, value);
  return w.finish();
}
