/**
 * vLLM's dev-mode cache route (vllm/entrypoints/serve/cache/api_router.py reset_prefix_cache), mounted only with
 * VLLM_SERVER_DEV_MODE=1 as vLLM does: POST /reset_prefix_cache?reset_running_requests=&reset_external= forgets
 * this model's cached prefixes; 200 empty when done, 409 "Prefix cache reset failed." while requests hold blocks
 * (unless reset_running_requests preempts them; they are recomputed).
 */
import { Elysia } from "elysia";
import { ApiError } from "./errors.ts";

/** What the route drives: the engine's reset (frontend/engine-frontend.ts); null where there is no one engine. */
export interface CacheControl {
  resetPrefixCache(resetRunningRequests: boolean): Promise<boolean>;
  /** whether a KV connector (offload tier, peer) holds prefixes outside the engine's pool */
  readonly hasExternalCache: boolean;
}

/** FastAPI's bool query values (pydantic: true/false, 1/0, yes/no, on/off, any case). */
function queryBool(raw: string | undefined, name: string): boolean {
  if (raw === undefined) return false;
  const v = raw.toLowerCase();
  if (["true", "1", "yes", "on", "t", "y"].includes(v)) return true;
  if (["false", "0", "no", "off", "f", "n"].includes(v)) return false;
  throw new ApiError("badRequest", `${name} must be a boolean (got ${raw})`, name);
}

export function cacheRoutes(control: CacheControl | null, log: (line: string) => void) {
  return new Elysia({ name: "dev-cache" })
    .post("/reset_prefix_cache", async ({ query }) => {
      const resetRunning = queryBool(query["reset_running_requests"], "reset_running_requests");
      const resetExternal = queryBool(query["reset_external"], "reset_external");
      if (control === null) throw new ApiError("badRequest", "this pipeline has no single engine whose prefix cache could be reset");
      if (resetExternal && control.hasExternalCache) throw new ApiError("badRequest", "reset_external=true is not supported: the KV connector's own cache cannot be reset", "reset_external");
      log("Resetting prefix cache...");
      if (!(await control.resetPrefixCache(resetRunning))) throw new ApiError("conflict", "Prefix cache reset failed.");
      return new Response(null, { status: 200 });
    }, { detail: { tags: ["Dev"], summary: "Reset the prefix cache: forget every cached prefix of this model's KV cache" } });
}
