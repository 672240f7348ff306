/// <reference types="@webgpu/types" />
/**
 * Getting a WebGPU device in Bun: Bun has no `navigator.gpu`, so fennec loads Dawn's Node-API addon (npm `webgpu`).
 * The addon is required by a literal path so `bun build --compile` embeds it in dist/fennec (the package's own
 * index.js requires it by a computed path, which the bundler cannot see). Every await here has a timeout: a broken
 * driver must give one clear line, never a hang.
 * @example const { device } = await openDawnDevice({ timeoutMs: 10_000 });
 */
/** No usable WebGPU on this machine (no addon, no adapter, no device, or a timeout): one line; `generate` exits 2 on it. */
export class WebGpuUnavailableError extends Error {
  override readonly name = "WebGpuUnavailableError";
}

interface DawnModule {
  create(flags: string[]): GPU;
  globals: Record<string, unknown>;
}

export interface DawnDevice {
  readonly adapter: GPUAdapter;
  readonly device: GPUDevice;
  /** "llvmpipe (LLVM 19.1.7, 256 bits)" style, for logs and bench tables */
  readonly description: string;
  /** the GPU object must stay reachable while the device lives (Dawn tears down with it) */
  readonly gpu: GPU;
}

export interface OpenDeviceOptions {
  /** limit for each of requestAdapter and requestDevice */
  readonly timeoutMs?: number;
  /** Dawn toggles / flags, e.g. ["backend=vulkan"] */
  readonly flags?: readonly string[];
}

const INSTALL_HINT = "install a Vulkan driver (see scripts/install-vulkan.sh)";

/** Loads dawn.node; the linux-x64 path is a literal so the compiled binary carries it. */
function loadDawn(): DawnModule {
  try {
    if (process.platform === "linux" && process.arch === "x64") {
      return require("webgpu/dist/linux-x64/dawn.node") as DawnModule;
    }
    if (process.platform === "linux" && process.arch === "arm64") {
      return require("webgpu/dist/linux-arm64/dawn.node") as DawnModule;
    }
    if (process.platform === "darwin") {
      return require("webgpu/dist/darwin-universal/dawn.node") as DawnModule;
    }
  } catch (e) {
    throw new WebGpuUnavailableError(`no WebGPU: cannot load Dawn's addon (${firstLine(e)}); ${INSTALL_HINT}`);
  }
  throw new WebGpuUnavailableError(`no WebGPU: Dawn is not bundled for ${process.platform}-${process.arch}`);
}

function firstLine(e: unknown): string {
  return String(e instanceof Error ? e.message : e).split("\n")[0]!;
}

/** Resolves p, or rejects with `message` after timeoutMs (the timer never keeps the process alive). */
async function withTimeout<T>(p: Promise<T>, timeoutMs: number, message: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new WebGpuUnavailableError(message)), timeoutMs);
    timer.unref?.();
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The adapter's limits we rely on, asked for explicitly (the defaults are far below what adapters offer). */
const WANTED_LIMITS = ["maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
  "maxStorageBuffersPerShaderStage", "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX"] as const;

/**
 * Opens the first adapter Dawn offers. Throws WebGpuUnavailableError (one line; exit 2 at the CLI) when there is no adapter, the
 * device cannot be created, or either step takes longer than timeoutMs.
 */
export async function openDawnDevice(options: OpenDeviceOptions = {}): Promise<DawnDevice> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const dawn = loadDawn();
  // the GPU* classes (GPUBufferUsage, GPUMapMode ...) are globals in browsers; shaders code reads them from there
  for (const [name, value] of Object.entries(dawn.globals)) {
    if (!(name in globalThis)) Object.assign(globalThis, { [name]: value });
  }
  const gpu = dawn.create([...(options.flags ?? [])]);
  let adapter: GPUAdapter | null;
  try {
    adapter = await withTimeout(gpu.requestAdapter({ powerPreference: "high-performance" }), timeoutMs,
      `no WebGPU adapter: requestAdapter did not answer within ${timeoutMs} ms; ${INSTALL_HINT}`);
  } catch (e) {
    if (e instanceof WebGpuUnavailableError) throw e;
    throw new WebGpuUnavailableError(`no WebGPU adapter: ${firstLine(e)}; ${INSTALL_HINT}`);
  }
  if (adapter === null) throw new WebGpuUnavailableError(`no WebGPU adapter: ${INSTALL_HINT}`);
  const requiredLimits: Record<string, number> = {};
  for (const name of WANTED_LIMITS) requiredLimits[name] = adapter.limits[name];
  let device: GPUDevice;
  try {
    device = await withTimeout(adapter.requestDevice({ requiredLimits }), timeoutMs,
      `WebGPU device: requestDevice did not answer within ${timeoutMs} ms`);
  } catch (e) {
    if (e instanceof WebGpuUnavailableError) throw e;
    throw new WebGpuUnavailableError(`WebGPU device failed: ${firstLine(e)}`);
  }
  const info = adapter.info;
  const description = [info.description || info.device || "unknown adapter", info.vendor ? `(${info.vendor})` : ""].join(" ").trim();
  return { adapter, device, description, gpu };
}
