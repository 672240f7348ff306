/**
 * Ollama's model names (ollama types/model/name.go ParseName): `[host/][namespace/]model[:tag]`, default tag
 * `latest`, looked up case-insensitively (server/routes.go getExistingName). fennec serves one model under its
 * served names (--served-model-name and aliases) plus the names /api/copy added; a request's `name:tag` resolves to
 * one of them: `fake` and `fake:latest` are the served `fake`. Anything else is Ollama's 404 `model 'x' not found`.
 * @example const names = new ModelNames(["qwen3"]); names.resolve("Qwen3:latest") // "qwen3"
 */
import { ApiError } from "../errors.ts";

const DEFAULT_TAG = "latest";

/** `name` with Ollama's default tag when it has none (a tag is what follows the last ":" after the last "/"). */
export function withTag(name: string): string {
  const lastSlash = name.lastIndexOf("/");
  return name.slice(lastSlash + 1).includes(":") ? name : `${name}:${DEFAULT_TAG}`;
}

/** Ollama's 404 for a name nothing answers to. */
export const modelNotFound = (name: string): ApiError => new ApiError("notFound", `model '${name}' not found`);

/** The names the server answers to on Ollama's routes: the served ones (fixed) and copies (added and deleted at run time). */
export class ModelNames {
  private readonly copies = new Set<string>();

  constructor(private readonly served: readonly string[]) {}

  /** every name, in Ollama's display form (`name:tag`), served names first */
  list(): string[] {
    return [...new Set([...this.served.map(withTag), ...this.copies])];
  }

  /** the listed name `requested` stands for, or null */
  find(requested: string): string | null {
    const wanted = withTag(requested.trim()).toLowerCase();
    return this.list().find((name) => name.toLowerCase() === wanted) ?? null;
  }

  /** the listed name, or Ollama's 400 for no name and 404 for an unknown one */
  resolve(requested: string | undefined): string {
    if (requested === undefined || requested.trim() === "") throw new ApiError("badRequest", "model is required");
    const found = this.find(requested);
    if (found === null) throw modelNotFound(requested);
    return found;
  }

  /** /api/copy: `destination` becomes one more name of the served model */
  copy(source: string, destination: string): void {
    const from = this.find(source);
    if (from === null) throw new ApiError("notFound", `model "${source}" not found`);
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$/.test(destination)) throw new ApiError("badRequest", `invalid model name: "${destination}"`);
    if (this.find(destination) === null) this.copies.add(withTag(destination));
  }

  /** /api/delete: only a copy can go; the served model stays for the life of the server */
  delete(requested: string): void {
    const found = this.find(requested);
    if (found === null) throw modelNotFound(requested);
    if (!this.copies.delete(found)) {
      throw new ApiError("badRequest", `model '${requested}' is the model this server serves; fennec cannot delete it (only names added with /api/copy can be deleted)`);
    }
  }
}
