/**
 * Ollama's GET /api/tags for a server of several models (model-router.ts): every served model, loaded or not, as
 * Ollama lists every local model, and every model's LoRA adapters with `details.parent_model` (adapter-models.ts). A
 * loaded model's app gives its own entries (its GGUF's facts, its names, its runtime-loaded adapters); a model not
 * loaded is listed by name with what is known without loading it (listing never loads a model).
 * @example const body = await severalModelsTags(registry.list(), (name) => registry.peek(name), adapters);
 */
import { createHash } from "node:crypto";
import { withTag } from "./model-names.ts";

interface TagsModel { readonly name: string; readonly state: string; readonly source: string }
interface TagsApp { handle(request: Request): Promise<Response> }
interface TagsAdapter { readonly model: string; readonly parent: string; readonly path: string }

/**
 * An entry for a name whose model is not loaded: Ollama's fields, the facts that need the file left empty; the digest
 * a SHA-256 of where the model (and adapter) come from, as model-details.ts identifies a served file by its path.
 */
function unloadedEntry(name: string, parentModel: string, source: string): Record<string, unknown> {
  return {
    name: withTag(name), model: withTag(name), modified_at: new Date(0).toISOString(), size: 0, digest: createHash("sha256").update(source).digest("hex"),
    details: { parent_model: parentModel, format: "gguf", family: "", families: [], parameter_size: "", quantization_level: "" },
  };
}

export async function severalModelsTags(models: readonly TagsModel[], peek: (name: string) => TagsApp | null, adapters: ReadonlyMap<string, TagsAdapter>): Promise<{ models: unknown[] }> {
  const entries: unknown[] = [];
  for (const m of models) {
    const app = m.state === "loaded" ? peek(m.name) : null;
    const listed = app === null ? null : await app.handle(new Request("http://fennec/api/tags")).then((r) => (r.ok ? r.json() as Promise<{ models?: unknown[] }> : null)).catch(() => null);
    if (listed?.models !== undefined) {
      entries.push(...listed.models);
      continue;
    }
    entries.push(unloadedEntry(m.name, "", m.source));
    for (const [name, a] of adapters) if (a.model === m.name) entries.push(unloadedEntry(name, withTag(a.parent), `${m.source}\n${a.path}`));
  }
  return { models: entries };
}
