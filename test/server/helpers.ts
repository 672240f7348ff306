/** Test helpers: build the app on a fake orchestrator and talk to it with app.handle (no port). */
import { createApp } from "../../src/server/app.ts";
import { DEFAULT_MAX_BODY_BYTES, type ServerOptions } from "../../src/server/server-options.ts";
import { createFakeOrchestrator, type FakeOptions, type FakeOrchestrator } from "./fake-orchestrator.ts";

export interface TestServer {
  readonly app: ReturnType<typeof createApp>;
  readonly fake: FakeOrchestrator;
  readonly logs: string[];
  readonly shutdown: AbortController;
  call(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
}

export function testServer(overrides: Partial<ServerOptions> = {}, fakeOptions: FakeOptions = {}): TestServer {
  const fake = createFakeOrchestrator(fakeOptions);
  const logs: string[] = [];
  const shutdown = new AbortController();
  const app = createApp({
    orchestrator: fake, servedModelName: "fake-model", modelPath: "/models/fake.gguf", apiKey: null,
    enablePerRequestMetrics: false, forceIncludeUsage: false, maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
    shutdownSignal: shutdown.signal, log: (line) => logs.push(line), ...overrides,
  });
  const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    app.handle(new Request(`http://localhost${path}`, {
      method,
      headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    }));
  return { app, fake, logs, shutdown, call };
}

/** Every `data:` payload of an SSE body, JSON-parsed except the final "[DONE]". */
export async function readSse(response: Response): Promise<unknown[]> {
  const text = await response.text();
  return text.split("\n\n").filter((e) => e !== "").map((e) => {
    if (!e.startsWith("data: ")) throw new Error(`not an SSE data event: ${JSON.stringify(e)}`);
    const payload = e.slice(6);
    return payload === "[DONE]" ? "[DONE]" : JSON.parse(payload);
  });
}

// loose JSON shapes for assertions
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = Record<string, any>;
