/**
 * llama.cpp (node-llama-cpp) as the numeric oracle, opened one way everywhere: CPU only and never building or
 * downloading anything. Callers still pass `threads` to every context (its default of 4 is 400-1000x slower on 2 cores).
 * @example const llama = await openLlamaCpp(); const model = await llama.loadModel({ modelPath });
 */
import type { Llama } from "node-llama-cpp";

export async function openLlamaCpp(quiet = false): Promise<Llama> {
  const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
  return getLlama({ gpu: false, build: "never", logLevel: quiet ? LlamaLogLevel.disabled : LlamaLogLevel.error });
}

/**
 * Disposes llama.cpp after a file's tests, waiting at most `limitMs`: node-llama-cpp's dispose once hung past the
 * 120 s hook timeout in a full run (test/gguf/make-model.test.ts, every test of the file already passed); the process
 * ends after the suite either way, so a hung dispose must not turn into a failure.
 * @example afterAll(() => disposeLlamaCpp(llama));
 */
export async function disposeLlamaCpp(llama: Llama | null | undefined, limitMs = 10_000): Promise<void> {
  if (llama === null || llama === undefined) return;
  await Promise.race([llama.dispose(), Bun.sleep(limitMs)]);
}
