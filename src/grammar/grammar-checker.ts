/**
 * Checks a structured-output constraint on the main thread before the request reaches an engine (vLLM validates in
 * its request processor, so a bad schema is a 400, never a failed generation). xgrammar runs on its own thread
 * (check-worker.ts), one check at a time, and that thread is replaced after every failure (xgrammar's memory is not
 * trustworthy after an abort). Good constraints are remembered, so a repeated schema costs a map lookup.
 * @example const error = await checker.check({ kind: "regex", pattern: "[0-9" }); // "Failed to transform regex ..."
 */
import { workerEntryUrl } from "../util/compiled-entry.ts";
import { grammarKey, type GrammarSpec } from "./grammar-spec.ts";
import type { CheckRequest, CheckResponse } from "./check-worker.ts";

/** good constraints remembered (oldest dropped first) */
const GOOD_CACHE_SIZE = 512;

interface PendingCheck {
  readonly request: CheckRequest;
  readonly resolve: (error: string | null) => void;
}

export class GrammarChecker {
  private worker: Worker | null = null;
  private readonly queue: PendingCheck[] = [];
  private inFlight: PendingCheck | null = null;
  private nextId = 1;
  private readonly good = new Set<string>();
  /** threads replaced after a failure (tests, logs) */
  numRestarts = 0;

  constructor(private readonly workerUrl: string = workerEntryUrl(import.meta.url, "./check-worker.ts", "grammar/check-worker.js")) {}

  /** null when xgrammar accepts the constraint, else vLLM's failure text with xgrammar's reason. */
  check(spec: GrammarSpec): Promise<string | null> {
    const key = grammarKey(spec);
    if (this.good.has(key)) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.queue.push({
        request: { id: this.nextId++, spec },
        resolve: (error) => {
          if (error === null) this.remember(key);
          resolve(error);
        },
      });
      this.pump();
    });
  }

  dispose(): void {
    this.worker?.terminate();
    this.worker = null;
  }

  private remember(key: string): void {
    this.good.add(key);
    if (this.good.size > GOOD_CACHE_SIZE) this.good.delete(this.good.values().next().value as string);
  }

  private pump(): void {
    if (this.inFlight || this.queue.length === 0) return;
    this.inFlight = this.queue.shift()!;
    this.ensureWorker().postMessage(this.inFlight.request);
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.workerUrl);
    (worker as Worker & { unref?: () => void }).unref?.(); // an idle checker never keeps the process alive (Bun)
    worker.onmessage = (event: MessageEvent<CheckResponse>) => {
      const done = this.inFlight;
      if (!done || done.request.id !== event.data.id) return;
      this.inFlight = null;
      if (event.data.error !== null) this.replace();
      done.resolve(event.data.error);
      this.pump();
    };
    worker.onerror = (event: ErrorEvent) => {
      const done = this.inFlight;
      this.inFlight = null;
      this.replace();
      done?.resolve(`the grammar checker failed: ${event.message}`);
      this.pump();
    };
    this.worker = worker;
    return worker;
  }

  private replace(): void {
    this.numRestarts++;
    this.worker?.terminate();
    this.worker = null;
  }
}
