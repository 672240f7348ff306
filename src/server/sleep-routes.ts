/**
 * vLLM's dev-mode sleep routes (vllm/entrypoints/serve/dev/sleep/api_router.py), mounted only with
 * VLLM_SERVER_DEV_MODE=1 as vLLM does: POST /sleep?level=1|2, POST /wake_up[?tags=weights|kv_cache], GET /is_sleeping. Without
 * --enable-sleep-mode they answer 400 (vLLM's engine refuses to sleep when sleep mode was not enabled).
 */
import { Elysia } from "elysia";
import { ApiError } from "./errors.ts";

/** What the routes drive: the engine's sleep (frontend/sleepable-orchestrator.ts), absent without --enable-sleep-mode. */
export interface SleepControl {
  sleep(level: 1 | 2): Promise<void>;
  /** the tags to wake; the engine serves once every tag is awake */
  wakeUp(tags?: readonly ("weights" | "kv_cache")[]): Promise<void>;
  isSleeping(): boolean;
}

const NOT_ENABLED = "Sleep mode is not enabled: start the server with --enable-sleep-mode.";

export function sleepRoutes(control: SleepControl | null) {
  const enabled = (): SleepControl => {
    if (control === null) throw new ApiError("badRequest", NOT_ENABLED);
    return control;
  };
  const detail = { tags: ["Dev"] };
  return new Elysia({ name: "dev-sleep" })
    .post("/sleep", async ({ query }) => {
      const raw = query["level"] ?? "1";
      if (raw !== "1" && raw !== "2") throw new ApiError("badRequest", `level must be 1 or 2 (got ${raw})`, "level");
      const mode = query["mode"] ?? "abort";
      if (mode !== "abort") throw new ApiError("badRequest", `mode ${mode} is not supported: in-flight requests are aborted (mode=abort)`, "mode");
      await enabled().sleep(raw === "1" ? 1 : 2);
      return new Response(null, { status: 200 });
    }, { detail: { ...detail, summary: "Sleep: stop the engine (level 1 or 2), freeing its weights and KV cache" } })
    .post("/wake_up", async ({ request }) => {
      const tags = new URL(request.url).searchParams.getAll("tags");
      const unknown = tags.filter((t) => t !== "weights" && t !== "kv_cache");
      if (unknown.length > 0) throw new ApiError("badRequest", `unknown tags ${unknown.join(", ")}: weights, kv_cache`, "tags");
      // vLLM's tags: none wakes everything; the engine serves (is_sleeping false) once every tag is awake
      await enabled().wakeUp(tags.length === 0 ? undefined : (tags as ("weights" | "kv_cache")[]));
      return new Response(null, { status: 200 });
    }, { detail: { ...detail, summary: "Wake up: start the engine again" } })
    .get("/is_sleeping", () => ({ is_sleeping: enabled().isSleeping() }), { detail: { ...detail, summary: "Whether the engine sleeps" } });
}
