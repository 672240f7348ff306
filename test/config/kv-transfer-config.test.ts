/** --kv-offloading-size / --kv-transfer-config: vLLM's keys, defaults, messages and warnings; refusals say why. */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parseKvTransfer, type KvTransferFlags } from "../../src/config/kv-transfer-config.ts";

const BASE: KvTransferFlags = { kvOffloadingSize: null, kvOffloadingBackend: "native", kvTransferConfig: null, useSimpleKvOffload: false, enablePrefixCaching: true };
const simple = (extra: Record<string, unknown>) => JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both", kv_connector_extra_config: extra });
const parse = (over: Partial<KvTransferFlags>) => parseKvTransfer({ ...BASE, ...over }, 16);

describe("kv transfer config", () => {
  test("nothing configured: no tier", () => {
    expect(parse({})).toEqual({ ok: true, value: { config: null, warnings: [] } });
  });

  test("--kv-offloading-size: native is OffloadingConnector with size x 2^30 bytes; VLLM_USE_SIMPLE_KV_OFFLOAD=1 picks the simple connector", () => {
    const native = parse({ kvOffloadingSize: 0.5 });
    expect(native.ok && native.value.config).toMatchObject({ connector: "OffloadingConnector", backend: "cpu", cpuBytes: 2 ** 29, kvOffloadingSize: 0.5, kvOffloadingBackend: "native", offloadPromptOnly: true });
    const s = parse({ kvOffloadingSize: 1, useSimpleKvOffload: true });
    expect(s.ok && s.value.config).toMatchObject({ connector: "SimpleCPUOffloadConnector", cpuBytes: 2 ** 30, lazy: false });
    expect(parse({ kvOffloadingSize: 1, kvOffloadingBackend: "lmcache" })).toMatchObject({ ok: false, error: expect.stringContaining("LMCache") });
  });

  test("SimpleCPUOffloadConnector defaults and the disk backend's keys", () => {
    const d = parse({ kvTransferConfig: simple({}) });
    expect(d.ok && d.value.config).toMatchObject({ backend: "cpu", cpuBytes: 8 * 2 ** 30, lazy: false, kvOffloadingSize: null });
    const disk = parse({ kvTransferConfig: simple({ kv_offload_backend: "disk", disk_path: "/tmp/x", lazy_offload: true }) });
    expect(disk.ok && disk.value.config).toMatchObject({ backend: "disk", diskPath: "/tmp/x", diskCapacityBytes: 100 * 2 ** 30, diskBufferSlots: 2, usePageCache: false, lazy: true });
  });

  test("vLLM's errors, word for word", () => {
    const cases: [string, string][] = [
      [simple({ kv_offload_backend: "nvme" }), "Unknown kv_offload_backend 'nvme'; expected one of ('cpu', 'disk')"],
      [simple({ kv_offload_backend: "disk" }), 'kv_offload_backend="disk" requires disk_path to be set.'],
      [JSON.stringify({ kv_connector: "OffloadingConnector", kv_role: "kv_both" }), "cpu_bytes_to_use must be specified in kv_connector_extra_config"],
      [JSON.stringify({ kv_connector: "OffloadingConnector", kv_role: "kv_both", kv_connector_extra_config: { cpu_bytes_to_use: 1, block_size: 16, blocks_per_chunk: 1 } }), "Specify only one of 'block_size' or 'blocks_per_chunk' in kv_connector_extra_config."],
      [JSON.stringify({ kv_connector: "OffloadingConnector", kv_role: "kv_both", kv_connector_extra_config: { cpu_bytes_to_use: 1, blocks_per_chunk: 0 } }), "'blocks_per_chunk' must be greater than 0."],
      [JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector" }), "Please specify kv_role when kv_connector is set, supported roles are ('kv_producer', 'kv_both', 'kv_consumer')"],
      [JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "both" }), "Unsupported kv_role: both. Supported roles are ('kv_producer', 'kv_both', 'kv_consumer')"],
    ];
    for (const [json, message] of cases) expect(parse({ kvTransferConfig: json })).toEqual({ ok: false, error: message });
  });

  test("what fennec cannot honour is refused, never ignored", () => {
    for (const json of [
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_connector_extra_config: { num_threads: 8 } }),
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_connector_extra_config: { push_registration_timeout: 1 } }),
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_connector_extra_config: { surprise: 1 } }),
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_rank: 0 }),
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_port: 70000 }),
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_load_failure_policy: "retry" }),
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_connector_extra_config: { backends: ["LIBFABRIC"] } }),
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_connector_extra_config: { kv_lease_duration: 0 } }),
      JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both", kv_port: 1 }),
      JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both", surprise: 1 }),
      JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_producer" }),
      JSON.stringify({ kv_connector: "SimpleCPUOffloadConnector", kv_role: "kv_both", kv_load_failure_policy: "fail" }),
      simple({ store_threshold: 2 }),
      JSON.stringify({ kv_connector: "OffloadingConnector", kv_role: "kv_both", kv_connector_extra_config: { cpu_bytes_to_use: 1, eviction_policy: "arc" } }),
      JSON.stringify({ kv_connector: "OffloadingConnector", kv_role: "kv_both", kv_connector_extra_config: { cpu_bytes_to_use: 1, block_size: 64 } }),
      "{not json",
    ]) {
      const r = parse({ kvTransferConfig: json });
      expect(r.ok).toBe(false);
      expect(r.ok ? "" : r.error).not.toBe("");
    }
    expect(parse({ kvOffloadingSize: 1, kvTransferConfig: simple({}) }).ok).toBe(false);
  });

  test("NixlConnector: fennec's connector between instances, vLLM's keys and defaults (side channel from VLLM_NIXL_SIDE_CHANNEL_*, lease 30 s, policy fail)", () => {
    const d = parse({ kvTransferConfig: JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_producer" }) });
    expect(d.ok && d.value.peer).toMatchObject({ connector: "NixlConnector", role: "kv_producer", host: "localhost", port: 5600, leaseSeconds: 30, loadFailurePolicy: "fail" });
    expect(d.ok && d.value.peer?.engineId).toMatch(/^[0-9a-f-]{36}$/);
    expect(d.ok && d.value.config).toBeNull();
    const env = parse({ kvTransferConfig: JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_consumer" }), sideChannelHost: "10.0.0.2", sideChannelPort: "6000" });
    expect(env.ok && env.value.peer).toMatchObject({ host: "10.0.0.2", port: 6000, role: "kv_consumer" });
    const given = parse({ kvTransferConfig: JSON.stringify({
      kv_connector: "NixlConnector", kv_role: "kv_both", engine_id: "p0", kv_ip: "127.0.0.1", kv_port: 0, kv_load_failure_policy: "recompute",
      kv_connector_extra_config: { kv_lease_duration: 5, backends: ["UCX"] },
    }), sideChannelPort: "6000" });
    expect(given.ok && given.value.peer).toEqual({ connector: "NixlConnector", role: "kv_both", engineId: "p0", host: "127.0.0.1", port: 0, leaseSeconds: 5, loadFailurePolicy: "recompute" });
    // vLLM's deprecation warning for kv_both with NIXL
    expect(given.ok && given.value.warnings[0]).toStartWith("Using kv_role='kv_both' with NixlConnector is deprecated");
    expect(parse({ kvTransferConfig: JSON.stringify({ kv_connector: "NixlConnector" }) })).toEqual({ ok: false, error: "Please specify kv_role when kv_connector is set, supported roles are ('kv_producer', 'kv_both', 'kv_consumer')" });
  });

  test("vLLM's warnings: disk-only keys on the cpu backend; no prefix caching turns the tier off", () => {
    const w = parse({ kvTransferConfig: simple({ disk_path: "/tmp/x" }) });
    expect(w.ok && w.value.warnings).toEqual(['kv_offload_backend is "cpu", ignoring disk-only config: disk_path. Set kv_offload_backend="disk" to enable the disk backend.']);
    const off = parse({ kvTransferConfig: simple({}), enablePrefixCaching: false });
    expect(off).toEqual({ ok: true, value: { config: null, warnings: ["Detected prefix caching disabled, disabling CPU offload since it requires prefix caching."] } });
  });

  test("the CLI refuses a bad config with one line and exit code 2, before loading anything", async () => {
    const cli = join(import.meta.dir, "../../src/cli.ts");
    const proc = Bun.spawn([process.execPath, cli, "serve", "--port", "0", "--kv-transfer-config", simple({ kv_offload_backend: "disk" })], { stdout: "pipe", stderr: "pipe" });
    const stderr = await new Response(proc.stderr).text();
    expect(await proc.exited).toBe(2);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toContain('kv_offload_backend="disk" requires disk_path to be set.');
  });
});
