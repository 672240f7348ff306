/**
 * Publishes KV event batches as vLLM's ZmqEventPublisher does (vllm/distributed/kv_events.py), for one engine
 * (one data-parallel rank):
 *
 *   publish(batch) -> queue (max_queue_size) -> [topic, seq (8 bytes big-endian), msgpack batch] on the PUB socket
 *                                             -> replay ring: the last buffer_steps (seq, payload) pairs
 *   ROUTER replay socket: [identity, "", start seq] -> [identity, "", topic, seq, payload] for every buffered seq >=
 *   start, then [identity, "", "", -1 (8 bytes), ""] (`_service_replay`)
 *
 * `seq` starts at 0 and grows by one per batch, whether or not anyone is subscribed, so a subscriber that sees a gap
 * can ask the replay socket for it. The publisher fills `data_parallel_rank` when a batch has none.
 *
 * vLLM runs this on its own thread so a slow subscriber never holds up the scheduler; fennec runs it on the main
 * thread, fed by the engine worker's step messages, for the same reason: the engine's loop never waits on a socket.
 * The queue is drained on the next turn of the event loop; when it already holds max_queue_size batches, publish()
 * first sends the oldest itself (vLLM's `Queue.put` blocks the caller until the thread takes one).
 */
import { err, ok, type Result } from "../util/result.ts";
import type { KvEventsConfig } from "./kv-events-config.ts";
import { encodeKvEventBatch, type KvCacheEvent } from "./kv-events.ts";
import { offsetEndpointPort, shouldBind } from "./zmq-endpoint.ts";
import { PubSocket, RouterSocket } from "./zmq-sockets.ts";

/** What the engine hands over per step (vLLM publishes only steps that produced events). */
export interface PublishedBatch {
  readonly ts: number;
  readonly events: readonly KvCacheEvent[];
  readonly dataParallelRank?: number | null;
}

/** vLLM's EventPublisher interface: NullEventPublisher or ZmqEventPublisher. */
export interface EventPublisher {
  publish(batch: PublishedBatch): void;
  shutdown(): Promise<void>;
}

export class NullEventPublisher implements EventPublisher {
  publish(): void {}
  async shutdown(): Promise<void> {}
}

/** ZmqEventPublisher.END_SEQ: -1 as a signed 8-byte big-endian int */
const END_SEQ = new Uint8Array(8).fill(0xff);
const EMPTY = new Uint8Array(0);
/** ZmqEventPublisher.SHUTDOWN_TIMEOUT */
const SHUTDOWN_TIMEOUT_MS = 1000;

const seqBytes = (seq: number): Uint8Array => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(seq), false);
  return b;
};

/** `int.from_bytes(b, "big")`: any length. */
const readSeq = (b: Uint8Array): bigint => b.reduce((acc, byte) => (acc << 8n) | BigInt(byte), 0n);

export class ZmqEventPublisher implements EventPublisher {
  private readonly pub: PubSocket;
  private readonly replay: RouterSocket | null;
  private readonly queue: PublishedBatch[] = [];
  /** [bufferSteps] ring of (seq, payload), oldest at `ringStart` */
  private readonly ring: { seq: number; payload: Uint8Array }[] = [];
  private ringStart = 0;
  private nextSeq = 0;
  private running = true;
  private drainScheduled = false;
  private readonly topic: Uint8Array;

  private constructor(
    private readonly config: KvEventsConfig,
    private readonly dataParallelRank: number,
    private readonly warn: (line: string) => void,
  ) {
    this.topic = new TextEncoder().encode(config.topic);
    this.pub = new PubSocket(config.hwm);
    this.replay = config.replayEndpoint === null ? null : new RouterSocket((frames) => this.serviceReplay(frames));
  }

  /**
   * Opens the sockets (PUB bound or connected by vLLM's rule, ROUTER always bound), ports offset by the rank.
   * @example const p = ZmqEventPublisher.open(config, 0); if (p.ok) p.value.publish({ ts: Date.now() / 1000, events })
   */
  static open(config: KvEventsConfig, dataParallelRank = 0, warn: (line: string) => void = () => {}): Result<ZmqEventPublisher> {
    const endpoint = offsetEndpointPort(config.endpoint, dataParallelRank);
    if (!endpoint.ok) return endpoint;
    const replayEndpoint = offsetEndpointPort(config.replayEndpoint, dataParallelRank);
    if (!replayEndpoint.ok) return replayEndpoint;
    const p = new ZmqEventPublisher(config, dataParallelRank, warn);
    const pubAt = shouldBind(endpoint.value!) ? p.pub.bind(endpoint.value!) : p.pub.connect(endpoint.value!);
    if (!pubAt.ok) {
      p.closeSockets();
      return err(`KV events publisher: ${pubAt.error}`);
    }
    if (p.replay !== null) {
      const replayAt = p.replay.bind(replayEndpoint.value!);
      if (!replayAt.ok) {
        p.closeSockets();
        return err(`KV events replay socket: ${replayAt.error}`);
      }
    }
    return ok(p);
  }

  /** The PUB endpoint as bound (the real port when 0 / * was asked) or connected. */
  get endpoint(): string {
    return this.pub.endpoint;
  }

  get replayEndpoint(): string | null {
    return this.replay?.endpoint ?? null;
  }

  /** Subscribed peers right now. */
  get numSubscribers(): number {
    return this.pub.numSubscribers;
  }

  /** Messages dropped for a subscriber at its high-water mark (ZeroMQ drops them silently; fennec counts them). */
  get droppedAtHwm(): number {
    return this.pub.droppedAtHwm;
  }

  /** The sequence number the next batch will carry. */
  get sequence(): number {
    return this.nextSeq;
  }

  publish(batch: PublishedBatch): void {
    if (!this.running) throw new Error("Publisher is closed");
    const stamped = batch.dataParallelRank == null ? { ...batch, dataParallelRank: this.dataParallelRank } : batch;
    if (this.queue.length >= this.config.maxQueueSize) this.sendOne();
    this.queue.push(stamped);
    if (!this.drainScheduled) {
      this.drainScheduled = true;
      setImmediate(() => this.drain());
    }
  }

  /** Sends what is queued, waits up to 1 s for subscribers' sockets to take it, then closes the sockets. */
  async shutdown(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.drain();
    const deadline = Date.now() + SHUTDOWN_TIMEOUT_MS;
    while (this.pub.hasQueued() && Date.now() < deadline) await Bun.sleep(10);
    this.closeSockets();
  }

  private drain(): void {
    this.drainScheduled = false;
    while (this.queue.length > 0) this.sendOne();
  }

  private sendOne(): void {
    const batch = this.queue.shift()!;
    const seq = this.nextSeq++;
    const payload = encodeKvEventBatch({ ts: batch.ts, events: batch.events, dataParallelRank: batch.dataParallelRank ?? this.dataParallelRank });
    this.pub.send([this.topic, seqBytes(seq), payload]);
    this.remember(seq, payload);
  }

  /** deque(maxlen=buffer_steps).append */
  private remember(seq: number, payload: Uint8Array): void {
    const cap = this.config.bufferSteps;
    if (cap === 0) return;
    if (this.ring.length < cap) this.ring.push({ seq, payload });
    else {
      this.ring[this.ringStart] = { seq, payload };
      this.ringStart = (this.ringStart + 1) % cap;
    }
  }

  private serviceReplay(frames: Uint8Array[]): void {
    if (this.replay === null) return;
    if (frames.length !== 3) {
      this.warn(`Invalid replay request: ${frames.length} frames (expected [identity, "", start seq])`);
      return;
    }
    const [clientId, , start] = frames as [Uint8Array, Uint8Array, Uint8Array];
    const startSeq = readSeq(start);
    for (let i = 0; i < this.ring.length; i++) {
      const { seq, payload } = this.ring[(this.ringStart + i) % this.ring.length]!;
      if (BigInt(seq) >= startSeq) this.replay.send([clientId, EMPTY, this.topic, seqBytes(seq), payload]);
    }
    this.replay.send([clientId, EMPTY, EMPTY, END_SEQ, EMPTY]);
  }

  private closeSockets(): void {
    this.pub.close();
    this.replay?.close();
  }
}

/**
 * EventPublisherFactory.create: the null publisher unless events are enabled with publisher "zmq".
 * @example createEventPublisher(parsed.config, 0)
 */
export function createEventPublisher(config: KvEventsConfig | null, dataParallelRank = 0, warn?: (line: string) => void): Result<EventPublisher> {
  if (config === null || !config.enableKvCacheEvents || config.publisher === "null") return ok(new NullEventPublisher());
  return ZmqEventPublisher.open(config, dataParallelRank, warn);
}
