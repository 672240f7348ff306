/**
 * vLLM's sleep mode (--enable-sleep-mode; AsyncLLM.sleep / wake_up / is_sleeping, docs/features/sleep_mode.md) over
 * one engine. On a CPU the KV cache shares the weights' wasm32 memories, which cannot shrink, so every sleep stops
 * the engine's Worker (its KV cache, activations and in-memory weights leave the process); the levels differ in what
 * stays, as vLLM's do:
 * - level 1 (vLLM: weights offloaded to host RAM, KV cache discarded): the model file's bytes are kept in this
 *   process's memory first (`hostCopy`), and wake_up starts the engine from them: no file is read again;
 * - level 2 (vLLM: weights and KV cache discarded): nothing is kept; wake_up reads the model file again.
 * Answers after wake_up are the ones before. Requests while asleep are refused with a 503 (code engine_sleeping).
 */
import { EngineRequestError, type EncodeOutput, type EncodeRequest, type GenerateRequest, type Orchestrator, type RequestOutput } from "./orchestrator.ts";

/** vLLM's sleep levels and the sleep_state label of vllm:engine_sleep_state they report. */
export const SLEEP_LEVELS = { 1: "weights_offloaded", 2: "discard_all" } as const;
export type SleepLevel = keyof typeof SLEEP_LEVELS;
export type SleepState = "awake" | (typeof SLEEP_LEVELS)[SleepLevel];
/** what wake_up brings back (vLLM's tags); here one engine start restores both, but each must be asked for */
export const WAKE_TAGS = ["weights", "kv_cache"] as const;
export type WakeTag = (typeof WAKE_TAGS)[number];

export class SleepableOrchestrator implements Orchestrator {
  private inner: Orchestrator | null;
  private state: SleepState = "awake";
  /** the sleep or wake-up under way: the next one waits for it */
  private transition: Promise<void> = Promise.resolve();

  /** the tags not woken yet since the last sleep: the engine serves once none is left (vLLM's is_sleeping) */
  private asleepTags = new Set<WakeTag>();
  /** level 1's host copy of the model file until wake_up hands it to the new engine */
  private hostWeights: ArrayBuffer | null = null;

  /**
   * `restart` starts the engine again (from `hostWeights` when given); `hostCopy` reads the model file into memory
   * for level 1 (null: nothing to keep, e.g. the embedded model, which is in memory anyway).
   */
  constructor(
    first: Orchestrator, private readonly restart: (hostWeights: ArrayBuffer | null) => Promise<Orchestrator>,
    private readonly onState: (state: SleepState) => void = () => {},
    private readonly hostCopy: () => Promise<ArrayBuffer | null> = async () => null,
  ) {
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
  /** tags still asleep (vLLM: is_sleeping stays true until every tag is awake) */
  get sleepingTags(): readonly WakeTag[] { return WAKE_TAGS.filter((t) => this.asleepTags.has(t)); }

  /** Stops the engine (in-flight requests are aborted, vLLM's default mode "abort"); a second sleep is a no-op. */
  sleep(level: SleepLevel): Promise<void> {
    return this.serially(async () => {
      if (this.inner === null) return;
      const inner = this.inner;
      // level 1: the weights go to host memory before the engine (and its copy of them) stops
      if (level === 1) this.hostWeights = await this.hostCopy();
      this.inner = null;
      this.asleepTags = new Set(WAKE_TAGS);
      this.state = SLEEP_LEVELS[level];
      this.onState(this.state);
      await inner.shutdown();
    });
  }

  /**
   * Wakes `tags` (default both, vLLM's wake_up with no tags): the engine starts with the first (weights and KV cache
   * come back together on a CPU), and serves once every tag is awake, as vLLM's does. A wake-up while awake is a no-op.
   */
  wakeUp(tags: readonly WakeTag[] = WAKE_TAGS): Promise<void> {
    return this.serially(async () => {
      if (this.state === "awake") return;
      if (this.inner === null) {
        // the host copy moves into the new engine's Worker (after a failed start the next wake_up reads the file)
        const host = this.hostWeights;
        this.hostWeights = null;
        this.inner = await this.restart(host);
      }
      for (const tag of tags) this.asleepTags.delete(tag);
      if (this.asleepTags.size > 0) return;
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

  /** bytes held in host memory while asleep at level 1 (0 otherwise) */
  get hostBytes(): number { return this.hostWeights?.byteLength ?? 0; }

  /** asleep, the KV cache is gone and so is every cached prefix: nothing to reset */
  resetPrefixCache(resetRunningRequests: boolean): Promise<boolean> {
    return this.inner === null || this.state !== "awake" ? Promise.resolve(true) : this.inner.resetPrefixCache?.(resetRunningRequests) ?? Promise.resolve(false);
  }

  async shutdown(): Promise<void> {
    await this.transition;
    await this.inner?.shutdown();
    this.inner = null;
  }

  private awake(): Orchestrator {
    if (this.inner === null || this.state !== "awake") throw new EngineRequestError("engine_sleeping", "The engine is sleeping (POST /sleep): POST /wake_up first.");
    return this.inner;
  }

  private serially(step: () => Promise<void>): Promise<void> {
    const next = this.transition.then(step);
    this.transition = next.catch(() => {});
    return next;
  }
}
