/**
 * LoRA adapters in the API, as vLLM serves them (vllm/entrypoints/openai/models/serving.py OpenAIServingModels,
 * vllm/entrypoints/serve/lora/api_router.py): the adapters by served name (--lora-modules, runtime loads), each a
 * `model` a request may name and a card in /v1/models (root = its path, parent = its base model); with
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING true, POST /v1/load_lora_adapter and /v1/unload_lora_adapter, with vLLM's bodies,
 * plain-text successes and error shapes. The engine reads and checks each adapter (one line on failure).
 *
 * Each adapter has vLLM's lora_int_id: the --lora-modules entries 1..n in order, each runtime load the next number
 * (OpenAIServingModels.lora_id_counter), a load_inplace of a loaded name keeps its number. The engine stamps it on the
 * adapter's KV events (lora_id). Every body field is used or refused: vLLM's unload ignores lora_int_id, fennec checks
 * it names the same adapter; is_3d_lora_weight (PEFT's fused MoE layout) has no GGUF form, so true is refused.
 */
import { existsSync } from "node:fs";
import { Elysia } from "elysia";
import { staticLoraIntId } from "../config/lora-config.ts";
import { ApiError } from "./errors.ts";

/** vLLM's LoadLoRAAdapterRequest and UnloadLoRAAdapterRequest fields (vllm/entrypoints/serve/lora/protocol.py) */
const LOAD_FIELDS = ["lora_name", "lora_path", "load_inplace", "is_3d_lora_weight"] as const;
const UNLOAD_FIELDS = ["lora_name", "lora_int_id"] as const;

/** vLLM's error types for these routes (InvalidUserInput, NotFoundError) on the status of `kind` */
function loraError(kind: "badRequest" | "notFound", message: string, type: string): ApiError {
  const e = new ApiError(kind, message);
  Object.defineProperty(e, "type", { value: type });
  return e;
}

/** What the routes drive: the engine's adapter registry (Orchestrator.loadLora / unloadLora). */
export interface LoraEngine {
  loadLora(name: string, path: string, loraIntId: number): Promise<string | null>;
  unloadLora(name: string): Promise<string | null>;
}

export interface LoraAdapterCard {
  readonly name: string;
  /** vLLM's lora_int_id (LoRARequest.adapter_id) */
  readonly id: number;
  readonly path: string;
  /** base_model_name, else the served model's first name */
  readonly parent: string;
  /** the LoRARequest's base_model_name (--lora-modules JSON); null for runtime loads, as vLLM's route passes none */
  readonly baseModelName: string | null;
  /** the LoRARequest's load_inplace: the body's, for a runtime load */
  readonly loadInplace: boolean;
}

/** The served adapters by name. */
export class LoraAdapters {
  private readonly cards = new Map<string, LoraAdapterCard>();
  /** the last lora_int_id given (vLLM's lora_id_counter) */
  private lastId: number;

  constructor(private readonly engine: LoraEngine, private readonly baseName: string, readonly runtimeUpdates: boolean, modules: readonly { name: string; path: string; baseModelName: string | null }[]) {
    for (const [i, m] of modules.entries()) this.cards.set(m.name, { name: m.name, id: staticLoraIntId(i), path: m.path, parent: m.baseModelName ?? baseName, baseModelName: m.baseModelName, loadInplace: false });
    this.lastId = modules.length;
  }

  /** the adapter served under `name`, or null */
  card(name: string): LoraAdapterCard | null {
    return this.cards.get(name) ?? null;
  }

  has(name: string | null | undefined): name is string {
    return typeof name === "string" && this.cards.has(name);
  }

  list(): readonly LoraAdapterCard[] {
    return [...this.cards.values()];
  }

  /** vLLM load_lora_adapter: 200 text, or ApiError (400 missing / already loaded / bad adapter, 404 no file). */
  async load(body: Record<string, unknown>): Promise<string> {
    checkFields(body, LOAD_FIELDS);
    const name = body["lora_name"];
    const path = body["lora_path"];
    if (typeof name !== "string" || name === "" || typeof path !== "string" || path === "") throw loraError("badRequest", "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput");
    const inplace = optionalBoolean(body, "load_inplace");
    if (optionalBoolean(body, "is_3d_lora_weight")) throw loraError("badRequest", "is_3d_lora_weight is not supported: fennec loads GGUF adapters (convert_lora_to_gguf.py output), which have no 3D (fused MoE) weight layout.", "InvalidUserInput");
    const loaded = this.cards.get(name);
    if (loaded !== undefined && !inplace) throw loraError("badRequest", `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`, "InvalidUserInput");
    if (!existsSync(path)) throw loraError("notFound", `Loading lora ${name} failed: No adapter found for ${path}`, "NotFoundError");
    // vLLM load_lora_adapter: in place keeps the adapter's int id, a new name takes the counter's next one
    const id = loaded?.id ?? this.lastId + 1;
    const error = await this.engine.loadLora(name, path, id);
    if (error !== null) throw loraError("badRequest", `Loading lora ${name} failed: ${error}`, "InvalidUserInput");
    if (loaded === undefined) this.lastId = id;
    // a new LoRARequest with no base_model_name, in place or not (vLLM load_lora_adapter): the parent is the served model
    this.cards.set(name, { name, id, path, parent: this.baseName, baseModelName: null, loadInplace: inplace });
    return `Success: LoRA adapter '${name}' added successfully.`;
  }

  /** vLLM unload_lora_adapter: 200 text, or ApiError (400 missing name, 404 unknown). */
  async unload(body: Record<string, unknown>): Promise<string> {
    checkFields(body, UNLOAD_FIELDS);
    const name = body["lora_name"];
    if (typeof name !== "string" || name === "") throw loraError("badRequest", "'lora_name' needs to be provided to unload a LoRA adapter.", "InvalidUserInput");
    const intId = body["lora_int_id"];
    if (intId !== undefined && intId !== null && !Number.isSafeInteger(intId)) throw loraError("badRequest", `lora_int_id must be an integer (got ${JSON.stringify(intId)}).`, "InvalidUserInput");
    const card = this.cards.get(name);
    if (card === undefined) throw loraError("notFound", `The lora adapter '${name}' cannot be found.`, "NotFoundError");
    if (typeof intId === "number" && intId !== card.id) throw loraError("badRequest", `lora_int_id ${intId} is not the lora adapter '${name}' (its lora_int_id is ${card.id}).`, "InvalidUserInput");
    await this.engine.unloadLora(name);
    this.cards.delete(name);
    return `Success: LoRA adapter '${name}' removed successfully.`;
  }
}

/** A field neither request type has is refused (never accepted and ignored). */
function checkFields(body: Record<string, unknown>, known: readonly string[]): void {
  const unknown = Object.keys(body).filter((k) => !known.includes(k));
  if (unknown.length > 0) throw loraError("badRequest", `Unknown field${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => `'${k}'`).join(", ")} (fields: ${known.join(", ")}).`, "InvalidUserInput");
}

/** A boolean field with vLLM's default false; another type is a 400. */
function optionalBoolean(body: Record<string, unknown>, key: string): boolean {
  const v = body[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== "boolean") throw loraError("badRequest", `${key} must be a boolean (got ${JSON.stringify(v)}).`, "InvalidUserInput");
  return v;
}

/** The runtime routes (mounted only when VLLM_ALLOW_RUNTIME_LORA_UPDATING is true, as vLLM mounts them). */
export function loraRoutes(adapters: LoraAdapters) {
  const detail = { tags: ["LoRA"] };
  const text = (s: string) => new Response(s, { status: 200, headers: { "content-type": "text/plain; charset=utf-8" } });
  return new Elysia({ name: "lora-runtime" })
    .post("/v1/load_lora_adapter", async ({ body }) => text(await adapters.load((body ?? {}) as Record<string, unknown>)), { detail: { ...detail, summary: "Load a LoRA adapter (GGUF) under a name requests can use as `model`" } })
    .post("/v1/unload_lora_adapter", async ({ body }) => text(await adapters.unload((body ?? {}) as Record<string, unknown>)), { detail: { ...detail, summary: "Unload a LoRA adapter" } });
}
