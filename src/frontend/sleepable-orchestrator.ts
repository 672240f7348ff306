/**
 * vLLM's sleep mode (--enable-sleep-mode; AsyncLLM.sleep / wake_up / is_sleeping, docs/features/sleep_mode.md) over
 * one engine: sleep stops the engine's Worker, so its weights, KV cache and activations leave the process, and wake_up
 * starts it again from the same model file with the same arguments, so answers after it are the ones before. On a
 * CPU the KV cache shares the weights' wasm32 memories, which cannot shrink: level 1 (vLLM: KV discarded, weights
 * offloaded to host RAM) therefore frees what level 2 does here, and both reload the weights on wake_up (from the
 * file, warm in the page cache). Requests while asleep are refused with a 503 (code engine_sleeping).
 */
import { EngineRequestError, type EncodeOutput, type EncodeRequest, type GenerateRequest, type Orchestrator, type RequestOutput } from "./orchestrator.ts";

/** vLLM's sleep levels and the sleep_state label of vllm:engine_sleep_state they report. */
export const SLEEP_LEVELS = { 1: "weights_offloaded", 2: "discard_all" } as const;
export type SleepLevel = keyof typeof SLEEP_LEVELS;
export type SleepState = "awake" | (typeof SLEEP_LEVELS)[SleepLevel];

export class SleepableOrchestrator implements Orchestrator {
  private inner: Orchestrator | null;
  private state: SleepState = "awake";
  /** the sleep or wake-up under way: the next one waits for it */
  private transition: Promise<void> = Promise.resolve();

  constructor(first: Orchestrator, private readonly restart: () => Promise<Orchestrator>, private readonly onState: (state: SleepState) => void = () => {}) {
    this.inner = first;
    this.modelConfig = first.modelConfig;
    this.maxModelLen = first.maxModelLen;
    this.tokenizer = first.tokenizer;
    this.pooler = first.pooler ?? null;
    if (first.encode !== undefined) this.encode = (request, signal) => this.awake().encode!(request, signal);
  }

  readonly modelConfig: Orchestrator["modelConfig"];
  readonly maxModelLen: number;
  readonly tokenizer: Orchestrator["tokenizer"];
  readonly pooler: Orchestrator["pooler"];
  encode?: (request: EncodeRequest, signal?: AbortSignal) => Promise<EncodeOutput>;

  get sleepState(): SleepState { return this.state; }
  isSleeping(): boolean { return this.state !== "awake"; }

  /** Stops the engine (in-flight requests are aborted, vLLM's default mode "abort"); a second sleep is a no-op. */
  sleep(level: SleepLevel): Promise<void> {
    return this.serially(async () => {
      if (this.inner === null) return;
      const inner = this.inner;
      this.inner = null;
      this.state = SLEEP_LEVELS[level];
      this.onState(this.state);
      await inner.shutdown();
    });
  }

  /** Starts the engine again; a wake-up while awake is a no-op. */
  wakeUp(): Promise<void> {
    return this.serially(async () => {
      if (this.inner !== null) return;
      this.inner = await this.restart();
      this.state = "awake";
      this.onState(this.state);
    });
  }

  generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    return this.awake().generate(request, signal);
  }

  /** asleep is healthy: the server answers, and wake_up brings the engine back */
  isHealthy(): boolean { return this.inner?.isHealthy() ?? true; }
  deathReason(): string | null { return this.inner?.deathReason?.() ?? null; }

  async shutdown(): Promise<void> {
    await this.transition;
    await this.inner?.shutdown();
    this.inner = null;
  }

  private awake(): Orchestrator {
    if (this.inner === null) throw new EngineRequestError("engine_sleeping", "The engine is sleeping (POST /sleep): POST /wake_up first.");
    return this.inner;
  }

  private serially(step: () => Promise<void>): Promise<void> {
    const next = this.transition.then(step);
    this.transition = next.catch(() => {});
    return next;
  }
}
