/**
 * The frames of fennec's KV side channel between instances (peer-connector.ts), on one TCP connection per
 * transfer. Control frames carry a small JSON object; block frames carry raw block bytes in the pool's layout
 * (block-transfer.ts), several blocks per frame, never JSON.
 *
 *   frame:  [u32 bodyBytes][u8 type][body]                                  (little-endian)
 *   READ    decode -> prefill  JSON {engine_id, request_id, block_ids, block_bytes, block_size, descriptors_per_block}
 *   BLOCKS  prefill -> decode  [u32 firstBlock][u32 numBlocks][numBlocks x block_bytes]
 *   ERROR   prefill -> decode  JSON {message}
 *   DONE    decode -> prefill  JSON {request_id}      (the read notification: the prefill side frees the blocks)
 *   HEARTBEAT decode -> prefill JSON {request_ids}   (still waiting to read them: their lease is extended)
 */
import { err, ok, type Result } from "../../util/result.ts";

export const FRAME = { read: 1, blocks: 2, error: 3, done: 4, heartbeat: 5 } as const;
export type FrameType = (typeof FRAME)[keyof typeof FRAME];

const HEADER_BYTES = 5;
/** one block frame holds at most this many bytes of blocks (whole blocks; at least one) */
export const MAX_BLOCK_FRAME_BYTES = 4 * 2 ** 20;
/** a control frame larger than this is a protocol error (a READ of 10^5 block ids is ~700 KB) */
const MAX_CONTROL_BYTES = 8 * 2 ** 20;

export interface ReadRequest {
  readonly engine_id: string;
  readonly request_id: string;
  readonly block_ids: readonly number[];
  readonly block_bytes: number;
  readonly block_size: number;
}

export function controlFrame(type: FrameType, body: unknown): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(body));
  const out = new Uint8Array(HEADER_BYTES + json.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, json.length + 1, true);
  view.setUint8(4, type);
  out.set(json, HEADER_BYTES);
  return out;
}

/** The header of a block frame; the block bytes follow it on the socket as they are (no copy into the frame). */
export function blocksHeader(firstBlock: number, numBlocks: number, dataBytes: number): Uint8Array {
  const out = new Uint8Array(HEADER_BYTES + 8);
  const view = new DataView(out.buffer);
  view.setUint32(0, 1 + 8 + dataBytes, true);
  view.setUint8(4, FRAME.blocks);
  view.setUint32(5, firstBlock, true);
  view.setUint32(9, numBlocks, true);
  return out;
}

export type Frame =
  | { readonly type: typeof FRAME.read | typeof FRAME.error | typeof FRAME.done | typeof FRAME.heartbeat; readonly json: Record<string, unknown> }
  | { readonly type: typeof FRAME.blocks; readonly firstBlock: number; readonly numBlocks: number; readonly data: Uint8Array };

/** Splits a byte stream into frames. Block bytes are copied once, from the socket's chunks into the frame's buffer. */
export class FrameReader {
  private chunks: Uint8Array[] = [];
  private buffered = 0;

  constructor(private readonly maxBlockFrameBytes: number) {}

  push(chunk: Uint8Array): Result<Frame[]> {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.buffered < HEADER_BYTES) return ok(frames);
      const head = this.peek(HEADER_BYTES);
      const view = new DataView(head.buffer, head.byteOffset, HEADER_BYTES);
      const bodyBytes = view.getUint32(0, true);
      const type = view.getUint8(4);
      const limit = type === FRAME.blocks ? this.maxBlockFrameBytes + 9 : MAX_CONTROL_BYTES;
      if (bodyBytes < 1 || bodyBytes > limit) return err(`KV side channel: frame of ${bodyBytes} bytes (type ${type}) is outside 1..${limit}`);
      if (this.buffered < 4 + bodyBytes) return ok(frames);
      const frame = this.take(4 + bodyBytes).subarray(HEADER_BYTES);
      if (type === FRAME.blocks) {
        if (frame.length < 8) return err("KV side channel: block frame shorter than its header");
        const v = new DataView(frame.buffer, frame.byteOffset, 8);
        frames.push({ type, firstBlock: v.getUint32(0, true), numBlocks: v.getUint32(4, true), data: frame.subarray(8) });
      } else if (type === FRAME.read || type === FRAME.error || type === FRAME.done || type === FRAME.heartbeat) {
        let json: unknown;
        try {
          json = JSON.parse(new TextDecoder().decode(frame));
        } catch {
          return err("KV side channel: control frame is not JSON");
        }
        if (typeof json !== "object" || json === null || Array.isArray(json)) return err("KV side channel: control frame is not a JSON object");
        frames.push({ type, json: json as Record<string, unknown> });
      } else {
        return err(`KV side channel: unknown frame type ${type}`);
      }
    }
  }

  private peek(n: number): Uint8Array {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!.subarray(0, n);
    return this.take(n, false);
  }

  /** The next n bytes (one copy when they span chunks); `consume` false leaves them buffered. */
  private take(n: number, consume = true): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (consume) this.drop(n);
      return out;
    }
    const out = new Uint8Array(n);
    let o = 0;
    for (const c of this.chunks) {
      const k = Math.min(c.length, n - o);
      out.set(c.subarray(0, k), o);
      o += k;
      if (o === n) break;
    }
    if (consume) this.drop(n);
    return out;
  }

  private drop(n: number): void {
    this.buffered -= n;
    while (n > 0) {
      const c = this.chunks[0]!;
      if (c.length <= n) { n -= c.length; this.chunks.shift(); }
      else { this.chunks[0] = c.subarray(n); n = 0; }
    }
  }
}
