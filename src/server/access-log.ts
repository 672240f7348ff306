/**
 * One access line per answered request in uvicorn's shape (uvicorn/logging.py AccessFormatter:
 * `%(client_addr)s - "%(request_line)s" %(status_code)s`, the status with its reason phrase), written through the
 * server log so it carries vLLM's level / time / source prefix:
 * `INFO 12-01 10:00:00 [access] 127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK`.
 * Off with --disable-uvicorn-access-log; below --uvicorn-log-level info it is not written either (uvicorn logs access at INFO).
 * @example options.accessLog?.({ client: "127.0.0.1:5000", method: "GET", target: "/health", status: 200 });
 */
import { STATUS_CODES } from "node:http";

export interface AccessEntry {
  /** "host:port" of the peer, null when the transport has none (a Unix socket) */
  readonly client: string | null;
  readonly method: string;
  /** path and query as the client sent them */
  readonly target: string;
  readonly status: number;
}

export function accessLine(entry: AccessEntry): string {
  const phrase = STATUS_CODES[entry.status];
  return `${entry.client ?? "-"} - "${entry.method} ${entry.target} HTTP/1.1" ${entry.status}${phrase ? ` ${phrase}` : ""}`;
}

/** Bun's peer address as uvicorn prints it: IPv6 in brackets is not used by uvicorn either ("::1:51234"). */
export function clientAddress(ip: { address: string; port: number } | null | undefined): string | null {
  return ip ? `${ip.address}:${ip.port}` : null;
}
