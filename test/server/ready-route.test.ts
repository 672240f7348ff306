/** GET /ready and /readyz: the readiness probes llm-d's manifests (and vLLM's multi-port supervisor) use. */
import { describe, expect, test } from "bun:test";
import { testServer } from "./helpers.ts";

describe("/ready and /readyz", () => {
  test.each(["/ready", "/readyz"])("%s: 200 with an empty body while the engine lives, 503 once it died, no API key needed", async (path) => {
    const s = testServer({ apiKey: "k" });
    const live = await s.call("GET", path);
    expect(live.status).toBe(200);
    expect(await live.text()).toBe("");
    s.fake.setHealthy(false);
    expect((await s.call("GET", path)).status).toBe(503);
  });
});
