/**
 * deploy/kubernetes, checked without a cluster (none can run here): Debian's kubectl renders the kustomization
 * offline; the InferencePool and HTTPRoute pass the JSON schemas in deploy/kubernetes/schema (ajv); every fennec
 * container's arguments parse as the fennec command line they are (command-line/parse-args.ts, the parser the binary uses, with the
 * container's environment); and the names, labels and ports the files share agree with each other.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import { parseAllDocuments } from "yaml";
import { parseCommandArgs } from "../../src/command-line/parse-args.ts";
import { proxyConfig } from "../../src/command-line/proxy-config.ts";
import { serveConfig } from "../../src/command-line/serve-config.ts";
import type { Command } from "../../src/command-line/flags.ts";
import { EPP_IMAGE, eppFlags, eppVersion, LOCAL_ONLY_FLAGS } from "../fixtures/gateway/epp-command.ts";

const DIR = join(import.meta.dir, "..", "..", "deploy", "kubernetes");
const kubectl = Bun.which("kubectl");

interface Resource {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly labels?: Record<string, string> };
  readonly spec: Record<string, unknown>;
}
interface Container {
  readonly name: string;
  readonly image: string;
  readonly args?: readonly string[];
  readonly env?: readonly { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  readonly ports?: readonly { name?: string; containerPort: number }[];
  readonly readinessProbe?: { httpGet?: { path: string; port: string | number } };
  readonly livenessProbe?: { httpGet?: { path: string; port: string | number } };
  readonly startupProbe?: { httpGet?: { path: string; port: string | number } };
}
interface PodTemplate {
  readonly metadata: { readonly labels: Record<string, string>; readonly annotations?: Record<string, string> };
  readonly spec: { readonly containers: readonly Container[]; readonly serviceAccountName?: string };
}

const kustomization = parseAllDocuments(readFileSync(join(DIR, "kustomization.yaml"), "utf8"))[0]!.toJS() as { resources: string[] };
const resources: Resource[] = kustomization.resources.flatMap((file) => parseAllDocuments(readFileSync(join(DIR, file), "utf8")).map((d) => {
  expect({ file, errors: d.errors.map(String) }).toEqual({ file, errors: [] });
  return d.toJS() as Resource;
}));
const byKind = (kind: string): Resource[] => resources.filter((r) => r.kind === kind);
const named = (kind: string, name: string): Resource => {
  const r = resources.find((x) => x.kind === kind && x.metadata.name === name);
  if (r === undefined) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return r;
};
const templateOf = (deployment: Resource): PodTemplate => deployment.spec.template as PodTemplate;
const portOf = (c: Container, nameOrNumber: string | number): number => typeof nameOrNumber === "number" ? nameOrNumber : c.ports!.find((p) => p.name === nameOrNumber)!.containerPort;
const fennecContainers = byKind("Deployment").flatMap((d) => templateOf(d).spec.containers.filter((c) => c.image.startsWith("fennec:")).map((c) => ({ deployment: d, container: c })));

interface EppConfig {
  readonly plugins: { readonly name?: string; readonly type: string; readonly parameters?: Record<string, any> }[];
  readonly dataLayer?: Record<string, unknown>;
  readonly schedulingProfiles: unknown[];
}
const eppConfig = parseAllDocuments((named("ConfigMap", "fennec-epp-config") as unknown as { data: Record<string, string> }).data["epp-config.yaml"]!)[0]!.toJS() as EppConfig;
const eppPlugin = (type: string, config = eppConfig) => {
  const plugin = config.plugins.find((p) => p.type === type);
  if (plugin === undefined) throw new Error(`no ${type} plugin in the EPP config`);
  return plugin;
};

/** The container's environment as the process sees it: field references get a sample pod's values. */
function envOf(c: Container): Record<string, string> {
  const sample: Record<string, string> = { "status.podIP": "10.1.2.3", "metadata.namespace": "default", "metadata.name": "pod-0" };
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? sample[e.valueFrom?.fieldRef?.fieldPath ?? ""] ?? ""]));
}

describe("deploy/kubernetes without a cluster", () => {
  test("the kustomization lists every manifest of the folder", () => {
    const yamls = readdirSync(DIR).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort();
    expect([...kustomization.resources].sort()).toEqual(yamls);
    expect(byKind("Deployment").map((d) => d.metadata.name).sort()).toEqual(["fennec-decode", "fennec-epp", "fennec-prefill"]);
  });

  (kubectl !== null ? test : test.skip)("kubectl kustomize renders it offline: the same resources, nothing dropped", () => {
    const run = Bun.spawnSync([kubectl!, "kustomize", DIR], { stdout: "pipe", stderr: "pipe", timeout: 60_000 });
    expect({ code: run.exitCode, stderr: run.exitCode === 0 ? "" : run.stderr.toString() }).toEqual({ code: 0, stderr: "" });
    const rendered = parseAllDocuments(run.stdout.toString()).map((d) => d.toJS() as Resource);
    expect(rendered.map((r) => `${r.kind}/${r.metadata.name}`).sort()).toEqual(resources.map((r) => `${r.kind}/${r.metadata.name}`).sort());
  });

  test("the InferencePool and the HTTPRoute pass their v1 schemas, and the schemas refuse a broken copy", () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const pool = ajv.compile(JSON.parse(readFileSync(join(DIR, "schema", "inferencepool-v1.schema.json"), "utf8")));
    const route = ajv.compile(JSON.parse(readFileSync(join(DIR, "schema", "httproute-v1.schema.json"), "utf8")));
    for (const p of byKind("InferencePool")) expect({ name: p.metadata.name, errors: pool(p) ? null : pool.errors }).toEqual({ name: p.metadata.name, errors: null });
    for (const r of byKind("HTTPRoute")) expect({ name: r.metadata.name, errors: route(r) ? null : route.errors }).toEqual({ name: r.metadata.name, errors: null });
    // the pre-v1 field names (v1alpha2) and a pool backendRef without its group are what the schemas must catch
    const old = structuredClone(byKind("InferencePool")[0]!) as unknown as { spec: Record<string, unknown> };
    old.spec = { ...old.spec, targetPortNumber: 8000 };
    expect(pool(old)).toBe(false);
    const loose = structuredClone(byKind("HTTPRoute")[0]!) as unknown as { spec: { rules: { backendRefs: Record<string, unknown>[] }[] } };
    delete loose.spec.rules[0]!.backendRefs[0]!.group;
    expect(route(loose)).toBe(false);
  });

  test("every fennec container's arguments are a valid fennec command line (the binary's own parser)", () => {
    expect(fennecContainers.length).toBe(4); // prefill, decode + its proxy, the picker's render server
    for (const { deployment, container } of fennecContainers) {
      const [command, ...args] = container.args ?? [];
      const where = `${deployment.metadata.name}/${container.name}`;
      const parsed = parseCommandArgs(command as Command, args);
      expect({ where, error: parsed.ok ? null : parsed.error }).toEqual({ where, error: null });
      if (!parsed.ok) continue;
      const config = command === "proxy" ? proxyConfig(parsed.value, envOf(container)) : serveConfig(parsed.value, envOf(container));
      expect({ where, error: config.ok ? null : config.error }).toEqual({ where, error: null });
    }
  });

  test("names, labels and ports agree across the files", () => {
    const pool = byKind("InferencePool")[0]!.spec as { selector: { matchLabels: Record<string, string> }; targetPorts: { number: number }[]; endpointPickerRef: { name: string; port: { number: number } } };
    const decode = templateOf(named("Deployment", "fennec-decode"));
    const prefill = templateOf(named("Deployment", "fennec-prefill"));
    // the pool selects the decode pods, and only them
    expect(decode.metadata.labels).toMatchObject(pool.selector.matchLabels);
    expect(prefill.metadata.labels).not.toMatchObject(pool.selector.matchLabels);
    // the pool's port is the decode pod's proxy; the proxy's --decode is that pod's engine; its --prefill the prefill Service
    const proxy = decode.spec.containers.find((c) => c.args?.[0] === "proxy")!;
    const engine = decode.spec.containers.find((c) => c.args?.[0] === "serve")!;
    const proxyArgs = parseCommandArgs("proxy", proxy.args!.slice(1));
    const engineArgs = parseCommandArgs("serve", engine.args!.slice(1));
    if (!proxyArgs.ok || !engineArgs.ok) throw new Error("arguments do not parse");
    expect(pool.targetPorts[0]!.number).toBe(Number(proxyArgs.value.port));
    expect(portOf(proxy, "http")).toBe(Number(proxyArgs.value.port));
    expect(proxyArgs.value.decode).toEqual([`http://127.0.0.1:${engineArgs.value.port}`]);
    const prefillService = named("Service", "fennec-prefill").spec as { selector: Record<string, string>; ports: { port: number; targetPort: string }[] };
    expect(proxyArgs.value.prefill).toEqual([`http://fennec-prefill:${prefillService.ports[0]!.port}`]);
    expect(prefill.metadata.labels).toMatchObject(prefillService.selector);
    // the picker: its Service is the pool's endpointPickerRef, on the port the EPP serves gRPC on; it scrapes the engine
    const eppService = named("Service", pool.endpointPickerRef.name).spec as { selector: Record<string, string>; ports: { port: number; targetPort: string }[] };
    expect(eppService.ports[0]!.port).toBe(pool.endpointPickerRef.port.number);
    const epp = templateOf(named("Deployment", "fennec-epp"));
    expect(epp.metadata.labels).toMatchObject(eppService.selector);
    const eppArgs = epp.spec.containers[0]!.args!;
    expect(eppArgs).toContain(`--pool-name=${byKind("InferencePool")[0]!.metadata.name}`);
    expect(eppPlugin("metrics-data-source").parameters).toMatchObject({ port: Number(engineArgs.value.port) });
    expect(eppArgs).toContain(`--grpc-port=${portOf(epp.spec.containers[0]!, "grpc")}`);
    // the route sends to this pool
    const route = byKind("HTTPRoute")[0]!.spec as { rules: { backendRefs: { kind: string; name: string }[] }[] };
    expect(route.rules[0]!.backendRefs[0]).toMatchObject({ kind: "InferencePool", name: byKind("InferencePool")[0]!.metadata.name });
  });

  test("the pod labels llm-d's picker reads: llm-d.ai/role (its prefill/decode filters) and the engine type of its metrics extractor", () => {
    // llm-d-inference-scheduler's by-label filters; the Inference Extension's core-metrics-extractor (engineLabelKey
    // default inference.networking.k8s.io/engine-type; the built-in "vllm" engineConfig reads vLLM's series names)
    expect(templateOf(named("Deployment", "fennec-prefill")).metadata.labels).toMatchObject({ "llm-d.ai/role": "prefill", "inference.networking.k8s.io/engine-type": "vllm" });
    expect(templateOf(named("Deployment", "fennec-decode")).metadata.labels).toMatchObject({ "llm-d.ai/role": "decode", "inference.networking.k8s.io/engine-type": "vllm" });
  });

  test("every fennec pod: probes on /health, Prometheus annotations naming the engine's /metrics port", () => {
    for (const name of ["fennec-prefill", "fennec-decode"]) {
      const t = templateOf(named("Deployment", name));
      const engine = t.spec.containers.find((c) => c.args?.[0] === "serve")!;
      for (const probe of [engine.readinessProbe, engine.livenessProbe, engine.startupProbe]) {
        expect({ name, path: probe?.httpGet?.path }).toEqual({ name, path: "/health" });
        const args = parseCommandArgs("serve", engine.args!.slice(1));
        expect(args.ok && portOf(engine, probe!.httpGet!.port) === Number(args.value.port)).toBe(true);
      }
      expect(t.metadata.annotations).toMatchObject({ "prometheus.io/scrape": "true", "prometheus.io/path": "/metrics", "prometheus.io/port": String(portOf(engine, engine.readinessProbe!.httpGet!.port)) });
    }
    const proxy = templateOf(named("Deployment", "fennec-decode")).spec.containers.find((c) => c.args?.[0] === "proxy")!;
    expect(proxy.readinessProbe?.httpGet?.path).toBe("/health");
  });
});

describe("KV cache events", () => {
  test("every fennec engine publishes on port 5556 with llm-d's topic kv@<pod IP>@<model> and a fixed hash seed", () => {
    const engines = fennecContainers.filter(({ deployment, container }) => container.args?.[0] === "serve" && deployment.metadata.name !== "fennec-epp");
    expect(engines.length).toBeGreaterThan(0);
    for (const { container } of engines) {
      const arg = container.args!.find((a) => a.startsWith("--kv-events-config="))!;
      const config = JSON.parse(arg.slice("--kv-events-config=".length)) as Record<string, unknown>;
      expect(config).toMatchObject({ enable_kv_cache_events: true, publisher: "zmq", endpoint: "tcp://*:5556" });
      expect(config["topic"]).toMatch(/^kv@\$\(POD_IP\)@[^@]+$/);
      expect(container.env?.find((e) => e.name === "POD_IP")?.valueFrom?.fieldRef?.fieldPath).toBe("status.podIP");
      expect(envOf(container)["PYTHONHASHSEED"]).toMatch(/^\d+$/);
      expect(container.ports?.some((p) => p.containerPort === 5556)).toBe(true);
    }
  });
});

describe("the endpoint picker: what the gateway test runs", () => {
  const fixture = parseAllDocuments(readFileSync(join(import.meta.dir, "..", "fixtures", "gateway", "epp-config.yaml"), "utf8"))[0]!.toJS() as EppConfig;
  const container = templateOf(named("Deployment", "fennec-epp")).spec.containers.find((c) => c.name === "epp")!;
  const flagName = (arg: string): string => arg.split("=")[0]!;

  test("the image is llm-d-router's EPP at the version scripts/install-gateway-peers.sh builds", () => {
    expect(container.image).toBe(`${EPP_IMAGE}:${eppVersion()}`);
  });

  test("the flags are the test's (the pool name, the config file, the ports), the config file is the mounted ConfigMap", () => {
    const testFlags = [...eppFlags("/x", { grpc: 1, grpcHealth: 2, metrics: 3 }), ...LOCAL_ONLY_FLAGS];
    expect(container.args!.map(flagName).filter((f) => !testFlags.map(flagName).includes(f))).toEqual([]);
    expect(eppFlags("/x", { grpc: 1, grpcHealth: 2, metrics: 3 }).map(flagName).filter((f) => !container.args!.map(flagName).includes(f))).toEqual([]);
    expect(container.args).toContain(eppFlags("/x", { grpc: 1, grpcHealth: 2, metrics: 3 })[0]!);
    const configArg = container.args!.find((a) => a.startsWith("--config-file="))!;
    const mount = (container as unknown as { volumeMounts: { name: string; mountPath: string }[] }).volumeMounts.find((m) => configArg.slice("--config-file=".length).startsWith(`${m.mountPath}/`))!;
    expect(configArg).toBe(`--config-file=${mount.mountPath}/epp-config.yaml`);
  });

  test("the test's config, but for the discovery (the InferencePool, not a file) and where the tokenizer listens", () => {
    const clusterForm = structuredClone(fixture) as { plugins: EppConfig["plugins"][number][]; dataLayer: Record<string, unknown> };
    clusterForm.plugins = clusterForm.plugins.filter((p) => p.type !== "file-discovery");
    delete clusterForm.dataLayer["discovery"];
    const tokenizer = (c: { plugins: EppConfig["plugins"] }) => c.plugins.find((p) => p.type === "token-producer")!.parameters!;
    const render = templateOf(named("Deployment", "fennec-epp")).spec.containers.find((c) => c.name === "render")!;
    const renderArgs = parseCommandArgs("serve", render.args!.slice(1));
    if (!renderArgs.ok) throw new Error(renderArgs.error);
    const engine = templateOf(named("Deployment", "fennec-decode")).spec.containers.find((c) => c.args?.[0] === "serve")!;
    const events = JSON.parse(engine.args!.find((a) => a.startsWith("--kv-events-config="))!.slice("--kv-events-config=".length)) as { endpoint: string; topic: string };
    // the fixture's ${MODEL} and ${RENDER_URL}: the engines' model, the fennec on the picker pod's loopback
    tokenizer(clusterForm)["modelName"] = events.topic.split("@")[2];
    tokenizer(clusterForm)["vllm"] = { url: `http://${renderArgs.value.host}:${renderArgs.value.port}` };
    expect(eppConfig).toEqual(clusterForm as unknown as EppConfig);
    // what the config says about the engines holds for the manifests' engines: the port of their /metrics, the port
    // their KV-event PUB socket is bound on, the topic prefix, the hash seed
    const producer = eppPlugin("precise-prefix-cache-producer").parameters!;
    expect(producer["kvEventsConfig"].podDiscoveryConfig.socketPort).toBe(Number(events.endpoint.split(":").pop()));
    expect(events.endpoint.startsWith("tcp://*:")).toBe(true);
    expect(events.topic.startsWith(producer["kvEventsConfig"].topicFilter)).toBe(true);
    expect(envOf(engine)["PYTHONHASHSEED"]).toBe(producer["tokenProcessorConfig"].hashSeed);
    const engineArgs = parseCommandArgs("serve", engine.args!.slice(1));
    if (!engineArgs.ok) throw new Error(engineArgs.error);
    expect(eppPlugin("metrics-data-source").parameters!["port"]).toBe(Number(engineArgs.value.port));
  });
});
