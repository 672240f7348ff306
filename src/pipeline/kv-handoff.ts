/**
 * The payload of a KV edge (disaggregated prefill -> decode, same model): the prompt's KV blocks as the prefill
 * engine exported them, framed so the decode side can check what it receives.
 * Layout: [magic u32 "FKV1"][numTokens u32][blockSize u32][dataBytes u32][data: dataBytes] (little-endian).
 */
import type { KvHandoff } from "../engine/protocol.ts";
import { err, ok, type Result } from "../util/result.ts";

const MAGIC = 0x31564b46; // "FKV1"
const HEADER_BYTES = 16;

/** @example const bytes = encodeKv({ numTokens: 7, blockSize: 16, data }); */
export function encodeKv(kv: KvHandoff): Uint8Array {
  const out = new Uint8Array(HEADER_BYTES + kv.data.byteLength); // [16 + dataBytes]
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, kv.numTokens, true);
  view.setUint32(8, kv.blockSize, true);
  view.setUint32(12, kv.data.byteLength, true);
  out.set(kv.data, HEADER_BYTES);
  return out;
}

export function decodeKv(bytes: Uint8Array): Result<KvHandoff> {
  if (bytes.byteLength < HEADER_BYTES) return err(`KV handoff of ${bytes.byteLength} bytes is shorter than its header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) return err("KV handoff has a bad magic number");
  const dataBytes = view.getUint32(12, true);
  if (HEADER_BYTES + dataBytes !== bytes.byteLength) return err(`KV handoff says ${dataBytes} data bytes but carries ${bytes.byteLength - HEADER_BYTES}`);
  // a view, not a copy: the receiver owns the transferred buffer
  return ok({ numTokens: view.getUint32(4, true), blockSize: view.getUint32(8, true), data: bytes.subarray(HEADER_BYTES) });
}
