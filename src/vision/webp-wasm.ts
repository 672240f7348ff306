/**
 * libwebp's decoder (@jsquash/webp, Emscripten WASM) with its .wasm embedded: the file import makes the bundler carry
 * it into the compiled binary (a /$bunfs path there), and the module is compiled from those bytes and handed to
 * jsquash's init, so nothing is looked up beside the executable at run time.
 */
import decodeWebp, { init as initWebp } from "@jsquash/webp/decode.js";
import webpWasmPath from "@jsquash/webp/codec/dec/webp_dec.wasm" with { type: "file" };

let ready: Promise<void> | null = null;

async function loadOnce(): Promise<void> {
  const module = await WebAssembly.compile(await Bun.file(webpWasmPath).arrayBuffer());
  await initWebp(module);
}

/** A WebP file to RGBA bytes ([height][width][4]); throws libwebp's failure. */
export async function decodeWebpRgba(bytes: Uint8Array): Promise<{ width: number; height: number; data: Uint8ClampedArray }> {
  ready ??= loadOnce().catch((e: unknown) => {
    ready = null;
    throw new Error(`the WebP decoder did not load: ${e instanceof Error ? e.message : String(e)}`);
  });
  await ready;
  // jsquash copies the bytes into the WASM heap; it wants a whole ArrayBuffer
  const image = await decodeWebp(bytes.slice().buffer as ArrayBuffer);
  return { width: image.width, height: image.height, data: image.data };
}
