/**
 * fennec behind a real gateway: Envoy in front of three replicas of the server (each in its own network namespace),
 * llm-d's endpoint picker (EPP) in file-discovery mode choosing each request's replica over ext_proc from the
 * replicas' KV cache events (`--kv-events-config`, precise prefix-cache scorer), their /metrics (KV-cache utilisation
 * and queue scorers) and a fourth server's /v1/completions/render (the prompt's token ids). Envoy's ORIGINAL_DST
 * cluster sends the request where the picker's x-gateway-destination-endpoint header says.
 * Peers: scripts/install-gateway-peers.sh (pinned versions; .ci/run installs them). Configs: test/fixtures/gateway/.
 * Each replica runs in a network namespace the test makes (as a pod has its own IP), so that every one binds its
 * KV-event PUB socket on its own address, port 5556, and the picker dials each, as deploy/kubernetes/epp.yaml has it;
 * the engine listens on port 8200 there. Which replica served a request is read from the replicas' own
 * vllm:request_success_total (Envoy's access log, kept with GATEWAY_TEST_LOGS=<dir>, names it too).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eppFlags, LOCAL_ONLY_FLAGS } from "../fixtures/gateway/epp-command.ts";
import { parseExposition, sampleValue } from "../metrics/exposition.ts";
import { serverCommand } from "./server-process.ts";

const ROOT = join(import.meta.dir, "..", "..");
const PEERS = process.env.GATEWAY_PEERS_DIR ?? join(ROOT, ".cache", "gateway-peers");
const EPP = join(PEERS, "bin", "epp");
const ENVOY = join(PEERS, "venv", "bin", "envoy");
const FIXTURES = join(import.meta.dir, "..", "fixtures", "gateway");

/** Why the peers are missing (install-gateway-peers.sh writes <peer>.unavailable when it cannot install one), or null. */
function missingPeers(): string | null {
  const missing: string[] = [];
  for (const [name, path] of [["epp", EPP], ["envoy", ENVOY]] as const) {
    if (existsSync(path)) continue;
    const why = join(PEERS, `${name}.unavailable`);
    missing.push(`${name}: ${existsSync(why) ? readFileSync(why, "utf8").trim() : `not installed at ${path}`}`);
  }
  if (missing.length > 0) return `needs the gateway peers from scripts/install-gateway-peers.sh (${missing.join("; ")})`;
  if (process.getuid?.() !== 0 || spawnSync("ip", ["netns", "list"]).status !== 0) return "needs root and iproute2 (`ip netns`) for the replicas' network namespaces";
  return null;
}
const skipReason = missingPeers();
if (skipReason) console.warn(`gateway-epp.test.ts skipped: ${skipReason}`);

const REPLICAS = 3;
/** The engine's port and its KV-event port in every replica's namespace: deploy/kubernetes's engine and kv-events ports. */
const ENGINE_PORT = 8200;
const KV_EVENTS_PORT = 5556;
/** Traffic shape: GROUPS long shared prefixes, ROUNDS requests each, sent round by round (g0 g1 g2 g3, g0 g1 ...). */
const GROUPS = 4;
const ROUNDS = 6;
const MAX_TOKENS = 2;
const RECEIVED = "llm_d_router_epp_kv_cache_events_messages_received_total";
const SUBSCRIBERS = "llm_d_router_epp_kv_cache_events_active_subscribers";

interface Proc {
  readonly child: ReturnType<typeof Bun.spawn>;
  log(): string;
  stop(): Promise<void>;
}

function spawnLogged(cmd: readonly string[], env: Record<string, string> = {}): Proc {
  const out: string[] = [];
  const child = Bun.spawn([...cmd], { cwd: ROOT, stdout: "pipe", stderr: "pipe", stdin: "ignore", env: { ...process.env, ...env } });
  for (const stream of [child.stdout, child.stderr] as ReadableStream<Uint8Array>[]) {
    void (async () => {
      const decoder = new TextDecoder();
      const reader = stream.getReader();
      for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(decoder.decode(r.value, { stream: true }));
    })();
  }
  return {
    child, log: () => out.join(""),
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await child.exited;
      clearTimeout(timer);
    },
  };
}

/** A port nothing listens on at `host` right now. */
function freePortOn(host: string): number {
  const probe = Bun.serve({ hostname: host, port: 0, fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

async function until(what: string, check: () => Promise<boolean>, ms: number, log: () => string = () => ""): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await Bun.sleep(100);
  }
  throw new Error(`${what}: not within ${ms} ms\n${log().slice(-4000)}`);
}

const fill = (template: string, values: Record<string, string | number>): string =>
  template.replace(/\$\{([A-Z_]+)\}/g, (_, key: string) => {
    if (!(key in values)) throw new Error(`no value for \${${key}}`);
    return String(values[key]);
  });

interface Replica {
  readonly ns: string;
  readonly host: string;
  readonly port: number;
  readonly url: string;
  proc: Proc;
}

/** Deterministic story text: `words` words from a small vocabulary, different per seed. */
function text(seed: number, words: number): string {
  const vocab = ["the", "little", "girl", "saw", "a", "big", "red", "ball", "in", "park", "and", "she", "was", "very",
    "happy", "to", "play", "with", "her", "friend", "dog", "tree", "sun", "sky", "blue", "bird", "sang", "song", "mom", "said"];
  let x = seed * 2654435761 % 4294967296;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x = (x * 1664525 + 1013904223) % 4294967296;
    out.push(vocab[x % vocab.length]!);
  }
  return out.join(" ");
}

/** The traffic of one phase: a shared prefix of ~10 blocks per group and a short distinct suffix per request. */
function traffic(set: number): { group: number; round: number; prompt: string }[] {
  const prefixes = Array.from({ length: GROUPS }, (_, g) => `Story ${set}-${g}. ${text(set * 100 + g, 80)}.`);
  const out: { group: number; round: number; prompt: string }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (let group = 0; group < GROUPS; group++) out.push({ group, round, prompt: `${prefixes[group]} Then ${text(set * 1000 + group * 10 + round, 4)}` });
  }
  return out;
}

/** `ip` as root, throwing with its message when it fails. */
function ip(...args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr.trim()}`);
}

/**
 * Namespace fgw<pid>-<i> with a veth pair to this one: 10.231.<net>.<4i+1> here, 10.231.<net>.<4i+2> inside (a /30
 * each; <net> from the pid, so two runs do not share a subnet). Namespaces an earlier run of this test left behind
 * (its process gone) are removed first.
 */
function makeNamespaces(count: number): { ns: string; address: string }[] {
  const listed = spawnSync("ip", ["netns", "list"], { encoding: "utf8" }).stdout;
  for (const m of listed.matchAll(/^fgw(\d+)-\d+/gm)) {
    if (spawnSync("kill", ["-0", m[1]!]).status !== 0) spawnSync("ip", ["netns", "del", m[0]]);
  }
  const net = 100 + (process.pid % 100);
  return Array.from({ length: count }, (_, i) => {
    const ns = `fgw${process.pid}-${i}`;
    const [outer, inner] = [`fgw${process.pid % 100000}h${i}`, `fgw${process.pid % 100000}n${i}`];
    ip("netns", "add", ns);
    ip("link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns);
    ip("addr", "add", `10.231.${net}.${4 * i + 1}/30`, "dev", outer);
    ip("link", "set", outer, "up");
    ip("-n", ns, "addr", "add", `10.231.${net}.${4 * i + 2}/30`, "dev", inner);
    ip("-n", ns, "link", "set", inner, "up");
    ip("-n", ns, "link", "set", "lo", "up");
    return { ns, address: `10.231.${net}.${4 * i + 2}` };
  });
}

describe.skipIf(skipReason !== null)("fennec replicas behind Envoy and llm-d's endpoint picker", () => {
  let dir = "";
  let endpointsFile = "";
  const replicas: Replica[] = [];
  let model = "";
  let render: Proc | undefined;
  let epp: Proc | undefined;
  let envoy: Proc | undefined;
  let gateway = "";
  let eppMetrics = "";
  /** A series of the picker's own /metrics (llm-d-router pkg/kvcache/metrics), summed over its labels. */
  const eppMetric = async (name: string): Promise<number> => sampleValue(parseExposition(await (await fetch(eppMetrics)).text()), name);
  const logs = (): string => `--- epp\n${epp?.log().slice(-3000)}\n--- envoy\n${envoy?.log().slice(-1500)}`;

  /** The endpoints file the picker watches: rewritten beside and renamed over (docs/discovery.md: one Create event). */
  function writeEndpoints(live: readonly Replica[]): void {
    const entries = live.map((r) => `  - name: fennec-${replicas.indexOf(r)}\n    address: "${r.host}"\n    port: "${r.port}"\n`);
    writeFileSync(`${endpointsFile}.tmp`, `endpoints:\n${entries.join("")}`);
    renameSync(`${endpointsFile}.tmp`, endpointsFile);
  }

  /** One replica in its namespace, with deploy/kubernetes's engine flags: KV events bound on every address there. */
  async function startReplica(r: Replica): Promise<Proc> {
    const events = { enable_kv_cache_events: true, publisher: "zmq", endpoint: `tcp://*:${KV_EVENTS_PORT}`, topic: `kv@${r.host}@${model}` };
    const proc = spawnLogged(["ip", "netns", "exec", r.ns, ...serverCommand(), "--host", "0.0.0.0", "--port", String(r.port),
      "--prefix-caching-hash-algo", "sha256_cbor", "--kv-events-config", JSON.stringify(events)], { PYTHONHASHSEED: "42" });
    await until(`replica ${r.url} /health`, async () => (await fetch(`${r.url}/health`)).status === 200, 60_000, proc.log);
    return proc;
  }

  const metricsOf = async (r: Replica) => parseExposition(await (await fetch(`${r.url}/metrics`)).text());
  const successTotal = async (r: Replica): Promise<number> => sampleValue(await metricsOf(r), "vllm:request_success_total");
  async function prefixCache(): Promise<{ hits: number; queries: number }> {
    let hits = 0, queries = 0;
    for (const r of replicas) {
      const samples = await metricsOf(r);
      hits += sampleValue(samples, "vllm:prefix_cache_hits_total");
      queries += sampleValue(samples, "vllm:prefix_cache_queries_total");
    }
    return { hits, queries };
  }

  const complete = (base: string, prompt: string): Promise<Response> => fetch(`${base}/v1/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt, max_tokens: MAX_TOKENS, temperature: 0 }),
  });

  /** Sends one request (nothing else in flight) and answers the replica whose own request counter moved. */
  async function servedBy(live: readonly Replica[], base: string, prompt: string): Promise<Replica> {
    const before = await Promise.all(live.map(successTotal));
    const res = await complete(base, prompt);
    const body = await res.text();
    if (res.status !== 200) throw new Error(`completion through ${base}: ${res.status} ${body}\n${logs()}`);
    let moved: number[] = [];
    await until("a replica counts the request", async () => {
      moved = (await Promise.all(live.map(successTotal))).map((v, i) => v - before[i]!);
      return moved.some((d) => d > 0);
    }, 5_000);
    const index = moved.indexOf(1);
    expect([...moved].sort()).toEqual([...Array(live.length - 1).fill(0), 1]);
    return live[index]!;
  }

  /** One phase of traffic, round by round; a short pause after the first round lets the KV events reach the picker. */
  async function run(set: number, target: (i: number) => { base: string; live: readonly Replica[] }): Promise<{ groupOf: Replica[][]; hitRate: number; hits: number; queries: number }> {
    const before = await prefixCache();
    const groupOf: Replica[][] = Array.from({ length: GROUPS }, () => []);
    const requests = traffic(set);
    for (const [i, { group, round, prompt }] of requests.entries()) {
      if (round === 1 && group === 0) await Bun.sleep(500);
      const { base, live } = target(i);
      groupOf[group]!.push(await servedBy(live, base, prompt));
    }
    const after = await prefixCache();
    const [hits, queries] = [after.hits - before.hits, after.queries - before.queries];
    return { groupOf, hitRate: hits / queries, hits, queries };
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "fennec-gateway-"));
    endpointsFile = join(dir, "endpoints.yaml");
    // the model server whose render endpoints tokenize prompts for the picker (llm-d runs `vllm launch render` beside it)
    const renderPort = freePortOn("127.0.0.1");
    render = spawnLogged([...serverCommand(), "--host", "127.0.0.1", "--port", String(renderPort)]);
    const renderUrl = `http://127.0.0.1:${renderPort}`;
    await until("render server /health", async () => (await fetch(`${renderUrl}/health`)).status === 200, 60_000, render.log);
    model = ((await (await fetch(`${renderUrl}/v1/models`)).json()) as { data: { id: string }[] }).data[0]!.id;

    for (const { ns, address } of makeNamespaces(REPLICAS)) {
      replicas.push({ ns, host: address, port: ENGINE_PORT, url: `http://${address}:${ENGINE_PORT}`, proc: undefined as unknown as Proc });
    }
    // the replicas first: the picker dials each one's KV-event socket as soon as the endpoints file names it
    const started = await Promise.all(replicas.map((r) => startReplica(r)));
    started.forEach((proc, i) => { replicas[i]!.proc = proc; });
    writeEndpoints(replicas);

    const [grpcPort, healthPort, metricsPort] = [freePortOn("127.0.0.1"), freePortOn("127.0.0.1"), freePortOn("127.0.0.1")];
    const configFile = join(dir, "epp-config.yaml");
    writeFileSync(configFile, fill(readFileSync(join(FIXTURES, "epp-config.yaml"), "utf8"), {
      ENDPOINTS_FILE: endpointsFile, MODEL: model, RENDER_URL: renderUrl,
    }));
    eppMetrics = `http://127.0.0.1:${metricsPort}/metrics`;
    epp = spawnLogged([EPP, ...eppFlags(configFile, { grpc: grpcPort, grpcHealth: healthPort, metrics: metricsPort }), ...LOCAL_ONLY_FLAGS]);

    const [envoyPort, adminPort] = [freePortOn("127.0.0.1"), freePortOn("127.0.0.1")];
    const envoyFile = join(dir, "envoy.yaml");
    writeFileSync(envoyFile, fill(readFileSync(join(FIXTURES, "envoy.yaml"), "utf8"), {
      ENVOY_PORT: envoyPort, ENVOY_ADMIN_PORT: adminPort, EPP_GRPC_PORT: grpcPort,
    }));
    envoy = spawnLogged([ENVOY, "-c", envoyFile, "--log-level", "warn", "--concurrency", "1", "--disable-hot-restart"]);
    gateway = `http://127.0.0.1:${envoyPort}`;
    await until("envoy /ready", async () => (await fetch(`http://127.0.0.1:${adminPort}/ready`)).status === 200, 30_000, logs);
    // the picker is ready once a request through the gateway is answered
    await until("a first request through the gateway", async () => (await complete(gateway, "Once upon a time")).status === 200, 60_000, logs);
  }, 120_000);

  afterAll(async () => {
    // GATEWAY_TEST_LOGS=<dir> keeps the peers' logs (the picker's choices and KV-event ingestion) for a look afterwards
    const keep = process.env.GATEWAY_TEST_LOGS;
    if (keep) {
      for (const [name, proc] of [["epp", epp], ["envoy", envoy], ["render", render], ...replicas.map((r, i) => [`replica-${i}`, r.proc] as const)] as const) {
        if (proc) writeFileSync(join(keep, `${name}.log`), proc.log());
      }
    }
    await envoy?.stop();
    await epp?.stop();
    await Promise.all(replicas.map((r) => r.proc?.stop()));
    await render?.stop();
    for (const r of replicas) spawnSync("ip", ["netns", "del", r.ns]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("(a, b) requests sharing a long prefix land on the replica that holds it; more prefix-cache hits than round robin", async () => {
    const viaGateway = await run(2, () => ({ base: gateway, live: replicas }));
    // round robin: the same requests in the same order to the replicas in turn, straight, on empty caches again
    await Promise.all(replicas.map(async (r) => {
      await r.proc.stop();
      r.proc = await startReplica(r);
    }));
    const rr = await run(2, (i) => ({ base: replicas[i % replicas.length]!.url, live: replicas }));
    let followers = 0, onHolder = 0;
    for (const served of viaGateway.groupOf) {
      followers += served.length - 1;
      onHolder += served.slice(1).filter((r) => r === served[0]).length;
    }
    const share = onHolder / followers;
    console.log(`gateway-epp: ${onHolder}/${followers} requests after the first of their prefix landed on its replica (${(100 * share).toFixed(1)}%); ` +
      `prefix-cache hit rate ${(100 * viaGateway.hitRate).toFixed(1)}% through the picker (${viaGateway.hits}/${viaGateway.queries} prompt tokens), ` +
      `${(100 * rr.hitRate).toFixed(1)}% round robin (${rr.hits}/${rr.queries}); ` +
      `groups per replica: ${viaGateway.groupOf.map((s) => replicas.indexOf(s[0]!)).join(",")}`);
    // the picker's own count of the KV-event batches it took from the replicas
    const received = await eppMetric(RECEIVED);
    console.log(`gateway-epp: the picker received ${received} KV-event messages`);
    expect(received).toBeGreaterThan(0);
    expect(share).toBeGreaterThanOrEqual(0.9);
    // by a clear margin: with every follower on its prefix's replica 5 of 6 requests per prefix hit it, round robin
    // over 3 replicas 3 of 6; a picker blind to the KV events scores within a few points of round robin
    expect(viaGateway.hitRate).toBeGreaterThan(rr.hitRate + 0.1);
  }, 120_000);

  test("(c) a replica that is stopped and taken out of the endpoints file gets no more traffic", async () => {
    const stopped = replicas[2]!;
    await stopped.proc.stop();
    writeEndpoints(replicas.slice(0, 2));
    await Bun.sleep(1000);
    // set 2's prefixes (some were cached on the stopped replica) and new ones; every request answered 200 by one of the
    // live replicas (its own counter moved): none went to the stopped one, where Envoy would have answered 503
    const live = replicas.slice(0, 2);
    const served = new Set<Replica>();
    for (const { prompt } of [...traffic(2).slice(0, GROUPS), ...traffic(3).slice(0, 2 * GROUPS)]) served.add(await servedBy(live, gateway, prompt));
    expect(served.size).toBeGreaterThan(0);
  }, 60_000);

  test("(d) no request is lost while a replica restarts", async () => {
    const restarting = replicas[0]!;
    let sent = 0;
    const failures: string[] = [];
    let running = true;
    const worker = async (w: number): Promise<void> => {
      for (let i = 0; running; i++) {
        const res = await complete(gateway, `${text(9000 + w * 1000 + (i % 5), 40)} ${i}`).catch((e: Error) => ({ status: 0, text: async () => e.message }));
        sent++;
        if (res.status !== 200) failures.push(`${res.status} ${await res.text()}`);
      }
    };
    const workers = [worker(0), worker(1)];
    await Bun.sleep(500);
    // drain: out of the file first, then stopped once its requests are done, started again, put back
    writeEndpoints([replicas[1]!]);
    await Bun.sleep(1000);
    await restarting.proc.stop();
    restarting.proc = await startReplica(restarting);
    writeEndpoints(replicas.slice(0, 2));
    await Bun.sleep(1500);
    running = false;
    await Promise.all(workers);
    console.log(`gateway-epp: ${sent} requests during the restart, ${failures.length} failed`);
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(10);
    // back in the file, the restarted replica is chosen again, and its new KV events reach the picker: a prefix it took
    // first keeps going there. The picker dials the replica's KV-event socket again when the file names it.
    await until("a KV-event subscriber for each live replica", async () => (await eppMetric(SUBSCRIBERS)) === 2, 20_000, logs);
    await Bun.sleep(500);
    const live = replicas.slice(0, 2);
    let held: string[] | null = null;
    for (let set = 10; set < 20 && held === null; set++) {
      const prompts = traffic(set).filter((r) => r.group === 0).map((r) => r.prompt);
      if ((await servedBy(live, gateway, prompts[0]!)) === restarting) held = prompts;
    }
    expect(held).not.toBeNull();
    await Bun.sleep(500);
    for (const prompt of held!.slice(1, 4)) expect((await servedBy(live, gateway, prompt)) === restarting).toBe(true);
  }, 90_000);
});
