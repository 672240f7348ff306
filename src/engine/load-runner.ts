/**
 * Worker side: builds the ModelRunner an engine runs on, from a RunnerSpec (a GGUF file on the kernel backend, or a
 * module such as the tests' fake model). The main thread never imports this file.
 */
import type { ModelRunner } from "../model/model-batch.ts";
import type { EngineArgs, RunnerSpec } from "./protocol.ts";
import type { PlacedModel } from "./engine-sizing.ts";
import { err, ok, type Result } from "../util/result.ts";
import { errorMessage } from "../util/error-message.ts";

function isRunnerModule(m: unknown): m is { createRunner: (options: unknown) => ModelRunner | Promise<ModelRunner> } {
  return typeof m === "object" && m !== null && typeof (m as { createRunner?: unknown }).createRunner === "function";
}

export interface LoadedRunner {
  readonly runner: ModelRunner;
  /** the backend's name for the ready message and logs */
  readonly backend: string;
  /** resolves with a reason if the device is lost (WebGPU): the engine is then dead */
  readonly lost?: Promise<string>;
  /** the GGUF's tokenizer.ggml.tokens, when it has them (a draft model's tokenizer is checked against the target's) */
  readonly tokens?: readonly string[];
  /** start-up lines (the CPU backend's memory accounting) */
  readonly startupLines?: readonly string[];
  /** what the CPU backend's memories were planned for (absent: not planned) */
  readonly placed?: PlacedModel;
}

export async function loadRunner(spec: RunnerSpec, args: EngineArgs): Promise<Result<LoadedRunner>> {
  switch (spec.kind) {
    case "module": {
      const mod: unknown = await import(spec.moduleUrl);
      if (!isRunnerModule(mod)) return err(`${spec.moduleUrl}: exports no createRunner(options)`);
      return ok({ runner: await mod.createRunner(spec.options), backend: `module ${spec.moduleUrl}` });
    }
    case "model": {
      const { openModelGguf } = await import("../gguf/model-source.ts");
      const { loadModel } = await import("../model/load-model.ts");
      const { Runner } = await import("../model/runner.ts");
      const { createBackend } = await import("../backend/create-backend.ts");
      const { parseGguf } = await import("../gguf/reader.ts");
      const { joinSplitParts } = await import("../gguf/split-gguf.ts");
      // sleep level 1 kept the file's bytes in memory: parse them, the file is not read again (other split parts are)
      const fromHost = spec.hostBytes !== undefined ? parseGguf(new Uint8Array(spec.hostBytes), spec.modelPath ?? "<model>") : null;
      const gguf = fromHost === null ? await openModelGguf(spec.modelPath) : fromHost.ok ? joinSplitParts(fromHost.value) : fromHost;
      if (!gguf.ok) return gguf;
      // --max-model-len picks LongRoPE's long or short factors, as llama.cpp's context size does
      const model = loadModel(gguf.value, args.maxModelLen === null ? {} : { maxModelLen: args.maxModelLen });
      if (!model.ok) return model;
      // --device cpu: the model over as many wasm32 memories as it needs, checked against the machine before loading
      const { placeModel } = await import("./model-placement.ts");
      const placement = args.device === "webgpu" ? null : placeModel(model.value.config, model.value.weights, args);
      if (placement !== null && !placement.ok) return placement;
      let backend: Awaited<ReturnType<typeof createBackend>>;
      try {
        // --device cpu: the WASM kernels on a thread pool; webgpu: the WGSL backend (one line when there is no adapter)
        backend = await createBackend(placement === null ? { kind: "webgpu" } : { kind: "wasm", threads: args.threads, memoryPlan: placement.value.plan });
      } catch (e) {
        return err(errorMessage(e));
      }
      const eightBit = args.kvCacheDtype === "fp8" || args.kvCacheDtype === "fp8_e4m3";
      let runner: InstanceType<typeof Runner>;
      try {
        runner = new Runner(model.value.config, model.value.weights, backend, undefined, eightBit ? "q8" : "f16");
      } catch (e) {
        backend.dispose();
        return err(errorMessage(e));
      }
      // compile every kernel the model's weight types need now, so the first request does not pay for it (WebGPU)
      await backend.warmUp?.([...new Set(gguf.value.tensors.map((t) => t.type))]);
      const { KEY } = await import("../gguf/names.ts");
      const tokens = gguf.value.metadata.get(KEY.tokens)?.value;
      return ok({
        runner, backend: backend.name, ...(backend.lost ? { lost: backend.lost } : {}),
        ...(placement !== null ? { startupLines: [placement.value.line], placed: { modelBytes: placement.value.modelBytes, kvBlocks: placement.value.kvBlocks, numMemories: placement.value.numMemories } } : {}),
        ...(Array.isArray(tokens) && tokens.every((t) => typeof t === "string") ? { tokens: tokens as string[] } : {}),
      });
    }
  }
}
