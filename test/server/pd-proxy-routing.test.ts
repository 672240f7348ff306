/**
 * Which prefill server `fennec proxy` sends each prefill leg to: its own round robin over every --prefill server
 * (given as one list or as the flag repeated, the way a launcher that adds one server at a time writes it), and the
 * host llm-d's picker chose when the routing sidecar's `x-prefiller-host-port` header names one
 * (llm-d-routing-sidecar internal/proxy: connector_nixlv2.go, proxy.go). Stand-in servers on real ports, the proxy
 * handler in-process.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { proxyConfig } from "../../src/command-line/proxy-config.ts";
import { createPdProxy, type PdProxy } from "../../src/server/pd-proxy.ts";

interface StandIn { readonly name: string; readonly url: string; readonly hostPort: string; readonly hits: string[]; stop(): void }

/** A prefill or decode stand-in: records the x-request-id of each request; answers as vLLM's NixlConnector would. */
function standIn(name: string): StandIn {
  const hits: string[] = [];
  const server = Bun.serve({
    port: 0, hostname: "127.0.0.1",
    async fetch(request) {
      await request.text();
      hits.push(request.headers.get("x-request-id") ?? "");
      return Response.json({ id: `cmpl-${name}`, object: "text_completion", choices: [{ index: 0, text: name, finish_reason: "length" }], kv_transfer_params: { do_remote_prefill: true, remote_engine_id: name } });
    },
  });
  return { name, url: `http://127.0.0.1:${server.port}`, hostPort: `127.0.0.1:${server.port}`, hits, stop: () => server.stop(true) };
}

let p1: StandIn, p2: StandIn, p3: StandIn, d1: StandIn;
beforeAll(() => { [p1, p2, p3, d1] = [standIn("p1"), standIn("p2"), standIn("p3"), standIn("d1")]; });
afterAll(() => { for (const s of [p1, p2, p3, d1]) s?.stop(); });

/** request ids unique across every proxy of the file (the stand-ins keep every id they saw) */
let nextId = 0;

function proxyFrom(argv: readonly string[]): PdProxy {
  const options = parseCommandArgs("proxy", argv);
  if (!options.ok) throw new Error(options.error);
  const config = proxyConfig(options.value, {});
  if (!config.ok) throw new Error(config.error);
  return createPdProxy({ prefill: config.value.prefill, decode: config.value.decode, upstreamTimeoutMs: 5000, log: () => {}, newRequestId: () => `r${nextId++}` });
}

async function prefillOf(proxy: PdProxy, headers: Record<string, string> = {}): Promise<string> {
  const response = await proxy.handle(new Request("http://proxy/v1/completions", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ model: "m", prompt: "hi", max_tokens: 2 }) }));
  expect(response.status).toBe(200);
  const id = response.headers.get("x-request-id")!;
  await response.text();
  const chosen = [p1, p2, p3].filter((p) => p.hits.includes(id));
  expect(chosen).toHaveLength(1);
  return chosen[0]!.name;
}

describe("fennec proxy: the prefill server of each request", () => {
  test("--prefill repeated: the round robin covers every server given (argparse's extend)", async () => {
    const proxy = proxyFrom(["--prefill", p1.url, "--prefill", p2.url, "--decode", d1.url]);
    const order = [];
    for (let i = 0; i < 4; i++) order.push(await prefillOf(proxy));
    expect(order).toEqual(["p1", "p2", "p1", "p2"]);
  });

  test("--prefill as one list and repeated, mixed: three servers in the order given", async () => {
    const proxy = proxyFrom(["--prefill", p1.url, p2.hostPort, "--decode", d1.url, "--prefill", p3.url]);
    const order = [];
    for (let i = 0; i < 3; i++) order.push(await prefillOf(proxy));
    expect(order).toEqual(["p1", "p2", "p3"]);
  });

  test("x-prefiller-host-port (llm-d's picker): that host gets the prefill leg; without it the round robin goes on", async () => {
    const proxy = proxyFrom(["--prefill", p1.url, p2.url, "--decode", d1.url]);
    expect(await prefillOf(proxy, { "x-prefiller-host-port": p3.hostPort })).toBe("p3");
    expect(await prefillOf(proxy, { "x-prefiller-host-port": p3.hostPort })).toBe("p3");
    // the header does not advance the round robin
    expect(await prefillOf(proxy)).toBe("p1");
    expect(await prefillOf(proxy)).toBe("p2");
    // a comma list: the first (the sidecar's rule); the legacy x-prefiller-url as a fallback
    expect(await prefillOf(proxy, { "x-prefiller-host-port": `${p2.hostPort}, ${p3.hostPort}` })).toBe("p2");
    expect(await prefillOf(proxy, { "x-prefiller-url": p3.url })).toBe("p3");
  });

  test("an x-prefiller-host-port that is not host:port: 400 naming the header, no leg sent", async () => {
    const proxy = proxyFrom(["--prefill", p1.url, "--decode", d1.url]);
    const before = p1.hits.length + d1.hits.length;
    const response = await proxy.handle(new Request("http://proxy/v1/completions", { method: "POST", headers: { "content-type": "application/json", "x-prefiller-host-port": "not a host/with path?" }, body: JSON.stringify({ model: "m", prompt: "hi" }) }));
    expect(response.status).toBe(400);
    const body = await response.json() as { error: { message: string; type: string } };
    expect(body.error.message).toContain("x-prefiller-host-port");
    expect(p1.hits.length + d1.hits.length).toBe(before);
  });
});
