/**
 * A model file's bytes read into this process's memory: what sleep level 1 keeps while the engine is stopped (vLLM's
 * level 1 offloads the weights to host RAM), so that wake_up starts the engine from memory and reads no file.
 * @example const bytes = await readHostCopy("model.gguf"); // ArrayBuffer of the file, or null
 */
import { statSync } from "node:fs";

/** One ArrayBuffer the GGUF parser reads holds less than this (reader.ts maps larger files in windows instead). */
const MAX_HOST_COPY_BYTES = 2 ** 31;

/**
 * The file's bytes, or null where no copy is kept: the embedded model (null path: in the binary's memory already) and
 * a file too large for one buffer (it is read from disk again on wake-up). The read runs off the main thread.
 */
export async function readHostCopy(path: string | null): Promise<ArrayBuffer | null> {
  if (path === null) return null;
  if (statSync(path).size >= MAX_HOST_COPY_BYTES) return null;
  return await Bun.file(path).arrayBuffer();
}
