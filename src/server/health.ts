/**
 * GET /health, GET|POST /ping (200 empty, 503 when the engine is dead) and GET /version
 * (vllm/entrypoints/openai/api_server.py: health, ping, show_version); GET /ready and /readyz as vLLM's multi-port
 * supervisor answers them (the probes llm-d's and other Kubernetes manifests point at): the routes exist only once
 * the model is loaded, so they answer as /health does.
 */
import { Elysia } from "elysia";
import pkg from "../../package.json" with { type: "json" };
import type { ServerOptions } from "./server-options.ts";

/** POST routes whose body vLLM never reads (app.ts does not parse it): an empty or non-JSON ping is no error. */
export const BODY_IGNORED_PATHS: ReadonlySet<string> = new Set(["/ping"]);

function health(options: ServerOptions): Response {
  return new Response(null, { status: options.orchestrator.isHealthy() ? 200 : 503 });
}

export function healthRoutes(options: ServerOptions) {
  const detail = { tags: ["Server"], description: "200 with an empty body while the engine is alive, 503 once it died." };
  return new Elysia({ name: "server-health" })
    .get("/health", () => health(options), { detail: { ...detail, summary: "Liveness" } })
    .get("/ping", () => health(options), { detail: { ...detail, summary: "SageMaker ping (same as /health)" } })
    .post("/ping", () => health(options), { detail: { ...detail, summary: "SageMaker ping (same as /health)" } })
    .get("/ready", () => health(options), { detail: { ...detail, summary: "Readiness (same as /health once serving)" } })
    .get("/readyz", () => health(options), { detail: { ...detail, summary: "Readiness (same as /health once serving)" } })
    .get("/version", () => ({ version: pkg.version }), { detail: { tags: ["Server"], summary: "fennec's version" } });
}
