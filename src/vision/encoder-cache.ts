/**
 * The encoder cache (vLLM's EncoderCacheManager and multimodal processor cache in one): image embeddings by the
 * image's content hash, least recently used dropped first past a byte budget, so the same image in many requests is
 * encoded once. The hash is vLLM's MultiModalHasher idea: the decoded pixels plus the processor settings.
 */

/** The content hash of a decoded image under one projector's settings (SHA-256, hex). */
export function imageHash(width: number, height: number, rgb: Uint8Array, processorKey: string): string {
  const h = new Bun.CryptoHasher("sha256");
  h.update(`${processorKey}\n${width}x${height}\n`);
  h.update(rgb);
  return h.digest("hex");
}

export class EncoderCache {
  private readonly entries = new Map<string, Float32Array>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** the cached embeddings, now the most recently used */
  get(hash: string): Float32Array | undefined {
    const hit = this.entries.get(hash);
    if (hit !== undefined) {
      this.entries.delete(hash);
      this.entries.set(hash, hit);
    }
    return hit;
  }

  set(hash: string, embeddings: Float32Array): void {
    if (this.entries.has(hash) || embeddings.byteLength > this.maxBytes) return;
    this.entries.set(hash, embeddings);
    this.bytes += embeddings.byteLength;
    for (const [oldest, value] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= value.byteLength;
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
