/**
 * The main thread's handle on the vision encoder's thread (vision-worker.ts): start it with a projector file, send
 * a prompt's images, get their embeddings back or the one line that says why an image cannot be used. A thread that
 * dies is replaced on the next request; the requests it held fail with a line saying so.
 * @example const vision = await VisionEncoder.start("mmproj.gguf"); const r = await vision.encode([pngBytes]);
 */
import { workerEntryUrl } from "../util/compiled-entry.ts";
import { err, ok, type Result } from "../util/result.ts";
import type { DecodeLimits } from "./image-decode.ts";
import { MAX_IMAGE_PIXELS } from "./image-header.ts";
import type { EncodedImage, FromVision, ToVision, VisionInfo } from "./vision-protocol.ts";

export type { EncodedImage, ImageLayoutPiece, VisionInfo } from "./vision-protocol.ts";

/** A refused image: which one (0-based, in prompt order) and why. */
export interface ImageRefusal {
  readonly index: number;
  readonly message: string;
}

/** the encoder cache's default budget: 1 GiB of embeddings (Gemma 3: about 400 images of 4b's width) */
const DEFAULT_CACHE_BYTES = 2 ** 30;

interface Pending {
  readonly resolve: (result: Result<readonly EncodedImage[], ImageRefusal>) => void;
}

export class VisionEncoder {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** images asked for and images found in the encoder cache (vLLM's mm_cache queries / hits), since start */
  queries = 0;
  hits = 0;

  private constructor(readonly info: VisionInfo, private readonly mmprojPath: string, private readonly cacheBytes: number, worker: Worker,
    private readonly limits: DecodeLimits, private readonly workerUrl: string) {
    this.adopt(worker);
  }

  /** Loads the projector on a new thread; the error names the file and what is wrong with it. */
  static async start(mmprojPath: string, options: { cacheBytes?: number; maxPixels?: number; workerUrl?: string } = {}): Promise<Result<VisionEncoder>> {
    const workerUrl = options.workerUrl ?? workerEntryUrl(import.meta.url, "./vision-worker.ts", "vision/vision-worker.js");
    const cacheBytes = options.cacheBytes ?? DEFAULT_CACHE_BYTES;
    const spawned = await spawn(workerUrl, mmprojPath, cacheBytes);
    if (!spawned.ok) return spawned;
    return ok(new VisionEncoder(spawned.value.info, mmprojPath, cacheBytes, spawned.value.worker, { maxPixels: options.maxPixels ?? MAX_IMAGE_PIXELS }, workerUrl));
  }

  /** The embeddings of each image, in order, or the first image that cannot be used. */
  async encode(images: readonly Uint8Array[]): Promise<Result<readonly EncodedImage[], ImageRefusal>> {
    const worker = await this.ensureWorker();
    if (!worker.ok) return err({ index: 0, message: worker.error });
    const id = this.nextId++;
    const result = await new Promise<Result<readonly EncodedImage[], ImageRefusal>>((resolve) => {
      this.pending.set(id, { resolve });
      worker.value.postMessage({ type: "encode", id, images, limits: this.limits } satisfies ToVision);
    });
    if (result.ok) {
      this.queries += result.value.length;
      this.hits += result.value.filter((i) => i.cacheHit).length;
    }
    return result;
  }

  dispose(): void {
    this.worker?.terminate();
    this.worker = null;
    this.failAll("the vision encoder was stopped");
  }

  private adopt(worker: Worker): void {
    this.worker = worker;
    (worker as Worker & { unref?: () => void }).unref?.();
    worker.onmessage = (event: MessageEvent<FromVision>) => {
      const m = event.data;
      if (m.type !== "encoded" && m.type !== "refused") return;
      const p = this.pending.get(m.id);
      if (p === undefined) return;
      this.pending.delete(m.id);
      p.resolve(m.type === "encoded" ? ok(m.images) : err({ index: m.index, message: m.message }));
    };
    worker.onerror = (event: ErrorEvent) => {
      worker.terminate();
      if (this.worker === worker) this.worker = null;
      this.failAll(`the vision encoder thread failed: ${event.message}`);
    };
  }

  private async ensureWorker(): Promise<Result<Worker>> {
    if (this.worker !== null) return ok(this.worker);
    const spawned = await spawn(this.workerUrl, this.mmprojPath, this.cacheBytes);
    if (!spawned.ok) return spawned;
    this.adopt(spawned.value.worker);
    return ok(spawned.value.worker);
  }

  private failAll(message: string): void {
    for (const p of this.pending.values()) p.resolve(err({ index: 0, message }));
    this.pending.clear();
  }
}

function spawn(workerUrl: string, mmprojPath: string, cacheBytes: number): Promise<Result<{ worker: Worker; info: VisionInfo }>> {
  return new Promise((resolve) => {
    const worker = new Worker(workerUrl);
    worker.onmessage = (event: MessageEvent<FromVision>) => {
      const m = event.data;
      if (m.type === "ready") resolve(ok({ worker, info: m.info }));
      else if (m.type === "initError") {
        worker.terminate();
        resolve(err(m.message));
      }
    };
    worker.onerror = (event: ErrorEvent) => {
      worker.terminate();
      resolve(err(`the vision encoder thread failed to start: ${event.message}`));
    };
    worker.postMessage({ type: "init", mmprojPath, cacheBytes } satisfies ToVision);
  });
}
