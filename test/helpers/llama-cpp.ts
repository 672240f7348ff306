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
