/**
 * LoRA adapters in the API, as vLLM serves them (vllm/entrypoints/openai/models/serving.py OpenAIServingModels,
 * vllm/entrypoints/serve/lora/api_router.py): the adapters by served name (--lora-modules, runtime loads), each a
 * `model` a request may name and a card in /v1/models (root = its path, parent = its base model); with
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING true, POST /v1/load_lora_adapter and /v1/unload_lora_adapter, with vLLM's bodies,
 * plain-text successes and error shapes. The engine reads and checks each adapter (one line on failure).
 */
import { existsSync } from "node:fs";
import { Elysia } from "elysia";
import { ApiError } from "./errors.ts";

/** vLLM's error types for these routes (InvalidUserInput, NotFoundError) on the status of `kind` */
function loraError(kind: "badRequest" | "notFound", message: string, type: string): ApiError {
  const e = new ApiError(kind, message);
  Object.defineProperty(e, "type", { value: type });
  return e;
}

/** What the routes drive: the engine's adapter registry (Orchestrator.loadLora / unloadLora). */
export interface LoraEngine {
  loadLora(name: string, path: string): Promise<string | null>;
  unloadLora(name: string): Promise<string | null>;
}

export interface LoraAdapterCard {
  readonly name: string;
  readonly path: string;
  /** base_model_name, else the served model's first name */
  readonly parent: string;
}

/** The served adapters by name. */
export class LoraAdapters {
  private readonly cards = new Map<string, LoraAdapterCard>();

  constructor(private readonly engine: LoraEngine, private readonly baseName: string, readonly runtimeUpdates: boolean, modules: readonly { name: string; path: string; baseModelName: string | null }[]) {
    for (const m of modules) this.cards.set(m.name, { name: m.name, path: m.path, parent: m.baseModelName ?? baseName });
  }

  has(name: string | null | undefined): name is string {
    return typeof name === "string" && this.cards.has(name);
  }

  list(): readonly LoraAdapterCard[] {
    return [...this.cards.values()];
  }

  /** vLLM load_lora_adapter: 200 text, or ApiError (400 missing / already loaded / bad adapter, 404 no file). */
  async load(body: Record<string, unknown>): Promise<string> {
    const name = body["lora_name"];
    const path = body["lora_path"];
    if (typeof name !== "string" || name === "" || typeof path !== "string" || path === "") throw loraError("badRequest", "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput");
    const inplace = body["load_inplace"] === true;
    if (this.cards.has(name) && !inplace) throw loraError("badRequest", `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`, "InvalidUserInput");
    if (!existsSync(path)) throw loraError("notFound", `Loading lora ${name} failed: No adapter found for ${path}`, "NotFoundError");
    const error = await this.engine.loadLora(name, path);
    if (error !== null) throw loraError("badRequest", `Loading lora ${name} failed: ${error}`, "InvalidUserInput");
    this.cards.set(name, { name, path, parent: this.baseName });
    return `Success: LoRA adapter '${name}' added successfully.`;
  }

  /** vLLM unload_lora_adapter: 200 text, or ApiError (400 missing name, 404 unknown). */
  async unload(body: Record<string, unknown>): Promise<string> {
    const name = body["lora_name"];
    if (typeof name !== "string" || name === "") throw loraError("badRequest", "'lora_name' needs to be provided to unload a LoRA adapter.", "InvalidUserInput");
    if (!this.cards.has(name)) throw loraError("notFound", `The lora adapter '${name}' cannot be found.`, "NotFoundError");
    await this.engine.unloadLora(name);
    this.cards.delete(name);
    return `Success: LoRA adapter '${name}' removed successfully.`;
  }
}

/** The runtime routes (mounted only when VLLM_ALLOW_RUNTIME_LORA_UPDATING is true, as vLLM mounts them). */
export function loraRoutes(adapters: LoraAdapters) {
  const detail = { tags: ["LoRA"] };
  const text = (s: string) => new Response(s, { status: 200, headers: { "content-type": "text/plain; charset=utf-8" } });
  return new Elysia({ name: "lora-runtime" })
    .post("/v1/load_lora_adapter", async ({ body }) => text(await adapters.load((body ?? {}) as Record<string, unknown>)), { detail: { ...detail, summary: "Load a LoRA adapter (GGUF) under a name requests can use as `model`" } })
    .post("/v1/unload_lora_adapter", async ({ body }) => text(await adapters.unload((body ?? {}) as Record<string, unknown>)), { detail: { ...detail, summary: "Unload a LoRA adapter" } });
}
