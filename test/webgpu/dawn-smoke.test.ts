/// <reference types="@webgpu/types" />
/**
 * Dawn works under Bun: a tiny compute shader adds two buffers on whatever adapter is present (lavapipe in CI, see
 * scripts/install-vulkan.sh).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openDawnDevice, type DawnDevice } from "../../src/backend/webgpu/dawn-device.ts";

let dawn: DawnDevice;
beforeAll(async () => { dawn = await openDawnDevice({ timeoutMs: 20_000 }); });
afterAll(() => dawn?.device.destroy());

const ADD_WGSL = /* wgsl */ `
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  if (id.x < arrayLength(&out)) { out[id.x] = a[id.x] + b[id.x]; }
}`;

test("an adapter is found and describes itself", () => {
  expect(dawn.description.length).toBeGreaterThan(0);
  expect(dawn.device.limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 << 20);
});

test("a compute shader adds two buffers", async () => {
  const { device } = dawn;
  const n = 1000;
  const a = Float32Array.from({ length: n }, (_, i) => i * 0.5);
  const b = Float32Array.from({ length: n }, (_, i) => 1000 - i);
  const mk = (data: Float32Array<ArrayBuffer>) => {
    const buf = device.createBuffer({ size: data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(buf, 0, data);
    return buf;
  };
  const out = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const staging = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const pipeline = device.createComputePipeline({ layout: "auto", compute: { module: device.createShaderModule({ code: ADD_WGSL }), entryPoint: "main" } });
  const bind = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [mk(a), mk(b), out].map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bind);
  pass.dispatchWorkgroups(Math.ceil(n / 64));
  pass.end();
  enc.copyBufferToBuffer(out, 0, staging, 0, n * 4);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const got = new Float32Array(staging.getMappedRange().slice(0));
  staging.unmap();
  for (let i = 0; i < n; i++) expect(got[i]).toBe(a[i]! + b[i]!);
});

test("the backend also runs inside a Worker (where the engine lives)", async () => {
  const worker = new Worker(new URL("./fixtures/worker-matmul.ts", import.meta.url).href);
  try {
    const result = await new Promise<unknown>((resolve, reject) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.onerror = (e) => reject(new Error(e.message));
    });
    expect(result).toEqual([12, 34]); // [[1, 2], [3, 4]] . [10, 1]
  } finally {
    worker.terminate();
  }
});
