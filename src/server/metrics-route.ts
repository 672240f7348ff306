/**
 * `GET /metrics`: the Prometheus text exposition of one MetricsRecorder (classic text format, as vLLM's instrumentator
 * route serves it: no OpenMetrics negotiation). Mounted by app.ts through ServerOptions.metricsRoute; it stays open
 * without the API key, like vLLM's.
 * @example createApp({ ..., metricsRoute: metricsRoute(recorder) })
 */
import { Elysia } from "elysia";
import type { MetricsRecorder } from "../metrics/recorder.ts";

export function metricsRoute(recorder: MetricsRecorder) {
  return new Elysia({ name: "metrics-route" }).get("/metrics", async () => {
    return new Response(await recorder.exposition(), { headers: { "content-type": recorder.contentType } });
  }, { detail: { tags: ["Server"], summary: "Prometheus metrics", description: "vLLM's series (same names, labels and buckets), the HTTP metrics and process metrics, in the text exposition format. Not guarded by --api-key." } });
}
