/**
 * ZeroMQ endpoint strings as the KV-event publisher reads them (vllm/distributed/kv_events.py ZmqEventPublisher):
 * `tcp://host:port` and `ipc:///path`, vLLM's bind-or-connect rule, and its port offset per data-parallel rank.
 * `inproc://` is refused: it reaches only sockets inside the same process, and fennec has no in-process consumer.
 */
import { err, ok, type Result } from "../util/result.ts";

export type Endpoint =
  | { readonly transport: "tcp"; readonly host: string; readonly port: number }
  | { readonly transport: "ipc"; readonly path: string };

/**
 * `tcp://*:5557` (every IPv4 interface), `tcp://[::]:5557` / `tcp://::1:5557` (IPv6), `tcp://host:5557`,
 * `ipc:///tmp/x.sock`. Port `*` or 0 asks for any free port when binding (libzmq's ephemeral port).
 * @example parseEndpoint("tcp://*:5557") // ok({ transport: "tcp", host: "0.0.0.0", port: 5557 })
 */
export function parseEndpoint(endpoint: string): Result<Endpoint> {
  if (endpoint.startsWith("ipc://")) {
    const path = endpoint.slice("ipc://".length);
    if (path === "" || path === "*") return err(`"${endpoint}": an ipc:// endpoint needs a socket file path`);
    return ok({ transport: "ipc", path });
  }
  if (endpoint.startsWith("inproc://")) {
    return err(`"${endpoint}": inproc:// reaches only sockets inside one process and fennec has none; use tcp:// or ipc://`);
  }
  if (!endpoint.startsWith("tcp://")) return err(`"${endpoint}": fennec's ZeroMQ sockets speak tcp:// and ipc://`);
  const rest = endpoint.slice("tcp://".length);
  const colon = rest.lastIndexOf(":");
  if (colon <= 0) return err(`"${endpoint}": a tcp:// endpoint is host:port`);
  let host = rest.slice(0, colon);
  const portText = rest.slice(colon + 1);
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (host === "*") host = "0.0.0.0";
  const port = portText === "*" ? 0 : Number(portText);
  if (!/^(\*|\d+)$/.test(portText) || port > 65535) return err(`"${endpoint}": the port must be 0..65535 or *`);
  return ok({ transport: "tcp", host, port });
}

/**
 * vLLM's rule: bind when the endpoint holds `*` or `::` or is ipc:// / inproc://, else connect ("bind stable,
 * connect volatile").
 * @example shouldBind("tcp://*:5557") // true; shouldBind("tcp://router:5557") // false
 */
export function shouldBind(endpoint: string): boolean {
  return endpoint.includes("*") || endpoint.includes("::") || endpoint.startsWith("ipc://") || endpoint.startsWith("inproc://");
}

/**
 * `offset_endpoint_port`: data-parallel rank r publishes on port + r (inproc names get `_dp<r>`); rank 0 and unset
 * endpoints are unchanged, and an endpoint that is neither tcp nor inproc is an error for r > 0.
 * @example offsetEndpointPort("tcp://*:5557", 2) // ok("tcp://*:5559")
 */
export function offsetEndpointPort(endpoint: string | null, dataParallelRank: number): Result<string | null> {
  if (!endpoint || dataParallelRank === 0) return ok(endpoint);
  if (endpoint.includes("inproc")) return ok(`${endpoint}_dp${dataParallelRank}`);
  if (endpoint.includes("tcp")) {
    const colon = endpoint.lastIndexOf(":");
    if (colon < 0) return ok(endpoint);
    const port = Number(endpoint.slice(colon + 1));
    if (!Number.isInteger(port)) return err(`"${endpoint}": cannot offset port "${endpoint.slice(colon + 1)}" by the data-parallel rank`);
    return ok(`${endpoint.slice(0, colon)}:${port + dataParallelRank}`);
  }
  return err("Invalid endpoint: must contain 'inproc' or 'tcp'");
}
