/**
 * The periodic `KV Transfer metrics: ...` line of vLLM's console stat logger for the NIXL connector
 * (vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py NixlKVConnectorStats.reduce): LoggingStatLogger prints
 * it after its engine lines for every interval that saw a transfer or a failed one. Values as Python's round(x, 3)
 * (descriptors round(x, 1)); MB = 2^20 bytes; throughput = MB / xfer seconds; P90 as numpy's linear percentile.
 */
import type { KvPeerStepStats, KvPeerTransfer, StepStats } from "../engine/stats.ts";

/** Python's repr of round(v, digits): 1.0 stays "1.0", 0.12345 is "0.123" */
function pyRound(v: number, digits: number): string {
  const r = Math.round(v * 10 ** digits) / 10 ** digits;
  return Number.isInteger(r) ? r.toFixed(1) : String(r);
}

function p90(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = 0.9 * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/**
 * One interval's line, or null when nothing was transferred or failed.
 * @example nixlLogLine([{ seconds: 0.002, postSeconds: 0.001, bytes: 2 ** 20, descriptors: 20 }], 0)
 * // "KV Transfer metrics: Num successful transfers=1, Avg xfer time (ms)=2.0, P90 xfer time (ms)=2.0, ..."
 */
export function nixlLogLine(transfers: readonly KvPeerTransfer[], failed: number): string | null {
  const n = transfers.length;
  if (n === 0 && failed === 0) return null;
  const xferMs = transfers.map((t) => t.seconds * 1000);
  const postMs = transfers.map((t) => t.postSeconds * 1000);
  const totalMb = transfers.reduce((s, t) => s + t.bytes, 0) / 2 ** 20;
  const totalS = transfers.reduce((s, t) => s + t.seconds, 0);
  const mean = (v: readonly number[]): number => (v.length === 0 ? 0 : v.reduce((s, x) => s + x, 0) / v.length);
  const fields: [string, string][] = [
    ["Num successful transfers", String(n)],
    ["Avg xfer time (ms)", pyRound(mean(xferMs), 3)],
    ["P90 xfer time (ms)", pyRound(n === 0 ? 0 : p90(xferMs), 3)],
    ["Avg post time (ms)", pyRound(mean(postMs), 3)],
    ["P90 post time (ms)", pyRound(n === 0 ? 0 : p90(postMs), 3)],
    ["Avg MB per transfer", pyRound(n === 0 ? 0 : totalMb / n, 3)],
    ["Throughput (MB/s)", pyRound(totalS === 0 ? 0 : totalMb / totalS, 3)],
    ["Avg number of descriptors", pyRound(mean(transfers.map((t) => t.descriptors)), 1)],
  ];
  return `KV Transfer metrics: ${fields.map(([k, v]) => `${k}=${v}`).join(", ")}`;
}

/** Sums the steps' transfers between two stats lines. */
export class NixlLogging {
  private transfers: KvPeerTransfer[] = [];
  private failed = 0;

  observe(stats: StepStats): void {
    const p: KvPeerStepStats | undefined = stats.kvPeer;
    if (p === undefined) return;
    this.transfers.push(...p.transfers);
    this.failed += p.failedTransfers;
  }

  takeLine(): string | null {
    const line = nixlLogLine(this.transfers, this.failed);
    this.transfers = [];
    this.failed = 0;
    return line;
  }
}
