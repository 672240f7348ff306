/**
 * libwebp's decoder (@jsquash/webp, Emscripten WASM) with its .wasm embedded: the file import makes the bundler carry
 * it into the compiled binary (a /$bunfs path there), and the module is compiled from those bytes and handed to
 * jsquash's init, so nothing is looked up beside the executable at run time. Emscripten's glue, when it believes it
 * runs in Node, gives the global object a `location` of its own ({ href: "" }); other libraries read a defined
 * `self.location` as a browser page's (@cfworker/json-schema builds a URL from its origin and throws), so the loader
 * takes it away again: libwebp never reads it outside a Web Worker.
 */
import webpWasmPath from "@jsquash/webp/codec/dec/webp_dec.wasm" with { type: "file" };

type DecodeWebp = (typeof import("@jsquash/webp/decode.js"))["default"];

let ready: Promise<DecodeWebp> | null = null;

async function loadOnce(): Promise<DecodeWebp> {
  const hadLocation = "location" in globalThis;
  try {
    const { default: decode, init } = await import("@jsquash/webp/decode.js");
    await init(await WebAssembly.compile(await Bun.file(webpWasmPath).arrayBuffer()));
    return decode;
  } finally {
    if (!hadLocation) delete (globalThis as { location?: unknown }).location;
  }
}

/** A WebP file to RGBA bytes ([height][width][4]); throws libwebp's failure. */
export async function decodeWebpRgba(bytes: Uint8Array): Promise<{ width: number; height: number; data: Uint8ClampedArray }> {
  ready ??= loadOnce().catch((e: unknown) => {
    ready = null;
    throw new Error(`the WebP decoder did not load: ${e instanceof Error ? e.message : String(e)}`);
  });
  const decodeWebp = await ready;
  // jsquash copies the bytes into the WASM heap; it wants a whole ArrayBuffer
  const image = await decodeWebp(bytes.slice().buffer as ArrayBuffer);
  return { width: image.width, height: image.height, data: image.data };
}
