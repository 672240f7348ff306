/**
 * The OTLP/HTTP trace receiver (otlp-receiver.py: decodes with opentelemetry-proto's official definitions) as a child
 * process, its spans collected as they arrive.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";

/** Debian's python3 with its python3-opentelemetry-proto, or the pinned venv scripts/install-test-deps.sh makes where
 * the release has no such package */
const VENV_PYTHON = join(import.meta.dir, "../../.cache/otlp-proto/venv/bin/python3");

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** "" for a root span */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP SpanKind: 2 = SERVER */
  readonly kind: number;
  readonly startTimeUnixNano: number;
  readonly endTimeUnixNano: number;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  readonly resource: Readonly<Record<string, string | number | boolean>>;
}

export interface TraceReceiver {
  /** base URL (the exporters append /v1/traces) */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** waits until `check` holds over the spans, at most `ms`; returns the spans then */
  until(check: (spans: readonly ReceivedSpan[]) => boolean, ms?: number): Promise<readonly ReceivedSpan[]>;
  stop(): Promise<void>;
}

export async function startTraceReceiver(): Promise<TraceReceiver> {
  const child = Bun.spawn([existsSync(VENV_PYTHON) ? VENV_PYTHON : "/usr/bin/python3", join(import.meta.dir, "otlp-receiver.py")], { stdout: "pipe", stderr: "inherit", stdin: "ignore" });
  const spans: ReceivedSpan[] = [];
  const { promise: port, resolve: resolvePort } = Promise.withResolvers<number>();
  void (async () => {
    const decoder = new TextDecoder();
    let pending = "";
    const reader = child.stdout.getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      pending += decoder.decode(next.value, { stream: true });
      let newline: number;
      while ((newline = pending.indexOf("\n")) >= 0) {
        const line = JSON.parse(pending.slice(0, newline)) as { port?: number } & ReceivedSpan;
        pending = pending.slice(newline + 1);
        if (line.port !== undefined) resolvePort(line.port); else spans.push(line);
      }
    }
  })();
  const timeout = setTimeout(() => child.kill(), 15_000);
  const listening = await Promise.race([port, child.exited.then((code) => { throw new Error(`otlp-receiver.py exited with ${code} (is opentelemetry-proto installed? scripts/install-test-deps.sh)`); })]);
  clearTimeout(timeout);
  return {
    url: `http://127.0.0.1:${listening}`,
    spans,
    async until(check, ms = 20_000) {
      const deadline = Date.now() + ms;
      while (!check(spans) && Date.now() < deadline) await Bun.sleep(100);
      return spans;
    },
    async stop() { child.kill(); await child.exited; },
  };
}
