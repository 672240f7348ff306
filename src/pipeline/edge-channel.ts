/**
 * One edge `i -> i+1` of a pipeline: a MessageChannel the sender posts serialized payloads on (the buffer is
 * transferred, not copied) and the receiving stage takes them from, by request id. It is where the omni transfer
 * timings come from (vllm_omni/distributed/omni_connectors/adapter.py: send / recv):
 * - tx_time_ms: serialize the payload + post it (the caller starts the clock before building the payload);
 * - in_flight_time_ms: receiver dequeue time - the sender's `sentMs` stamp (queue latency), floored at 0;
 * - rx_decode_time_ms: the receiver's deserialize time (the caller measures it around its decode).
 * @example const edge = new EdgeChannel(0, 1); const sent = edge.send("r1", bytes); const got = await edge.receive("r1");
 */
import { nowMs } from "../util/clock.ts";

interface EdgeMessage {
  readonly requestId: string;
  readonly sentMs: number;
  readonly payload: ArrayBuffer;
}

export interface Received {
  readonly payload: Uint8Array;
  readonly sizeBytes: number;
  readonly inFlightTimeMs: number;
}

/** Bun and Node ports can be (un)referenced so an idle edge does not keep the process alive */
type RefPort = MessagePort & { ref?(): void; unref?(): void };

export class EdgeChannel {
  private readonly channel = new MessageChannel();
  /** messages that arrived before their receiver asked */
  private readonly arrived = new Map<string, { message: EdgeMessage; dequeuedMs: number }>();
  private readonly waiting = new Map<string, (r: Received) => void>();
  private numOpen = 0;

  constructor(readonly fromStage: number, readonly toStage: number) {
    this.channel.port2.onmessage = (event: MessageEvent<EdgeMessage>) => {
      const dequeuedMs = nowMs();
      const message = event.data;
      const resolve = this.waiting.get(message.requestId);
      if (resolve) {
        this.waiting.delete(message.requestId);
        this.settle();
        resolve(this.toReceived(message, dequeuedMs));
      } else {
        this.arrived.set(message.requestId, { message, dequeuedMs });
      }
    };
    // a listening port keeps the process alive: only while something is in flight
    (this.channel.port2 as RefPort).unref?.();
  }

  private toReceived(message: EdgeMessage, dequeuedMs: number): Received {
    return { payload: new Uint8Array(message.payload), sizeBytes: message.payload.byteLength, inFlightTimeMs: Math.max(0, dequeuedMs - message.sentMs) };
  }

  private settle(): void {
    if (--this.numOpen === 0) (this.channel.port2 as RefPort).unref?.();
  }

  /** Posts the payload (its buffer is transferred: do not use `payload` afterwards). */
  send(requestId: string, payload: Uint8Array): { readonly sizeBytes: number } {
    const buffer = payload.byteOffset === 0 && payload.byteLength === payload.buffer.byteLength && payload.buffer instanceof ArrayBuffer
      ? payload.buffer
      : payload.slice().buffer;
    const sizeBytes = buffer.byteLength;
    if (this.numOpen++ === 0) (this.channel.port2 as RefPort).ref?.();
    const message: EdgeMessage = { requestId, sentMs: nowMs(), payload: buffer };
    this.channel.port1.postMessage(message, [buffer]);
    return { sizeBytes };
  }

  /** Resolves with the request's payload once it has come through the channel. */
  receive(requestId: string): Promise<Received> {
    const early = this.arrived.get(requestId);
    if (early) {
      this.arrived.delete(requestId);
      this.settle();
      return Promise.resolve(this.toReceived(early.message, early.dequeuedMs));
    }
    return new Promise((resolve) => this.waiting.set(requestId, resolve));
  }

  close(): void {
    this.channel.port1.close();
    this.channel.port2.close();
  }
}
