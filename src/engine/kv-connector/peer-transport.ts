/**
 * The transport of the connector between instances (peer-connector.ts): fennec's own TCP side channel in place of
 * NIXL's (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py: the side-channel handshake, the block reads
 * and the read notifications), speaking the frames of peer-wire.ts. The prefill side serves its pinned blocks; the
 * decode side reads them with one connection per request (READ, the block frames, DONE) and sends one-frame
 * notifications (DONE for blocks it will never read, HEARTBEAT for requests still queued). What the frames mean for
 * the requests and their blocks is the connector's; this file only moves bytes and says how a read ended.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import type { KvPeerTransfer } from "../stats.ts";
import { blocksHeader, controlFrame, FRAME, FrameReader, MAX_BLOCK_FRAME_BYTES, type ReadRequest } from "./peer-wire.ts";
import { errorMessage } from "../../util/error-message.ts";

/** Where a request's blocks are held: the prefill instance's side channel and its ids for the request. */
export interface RemoteBlocks {
  readonly engineId: string;
  readonly requestId: string;
  readonly host: string;
  readonly port: number;
}

/** One read from a prefill instance, settled exactly once: its bytes and timings, or why it failed. */
export interface BlockReadJob {
  readonly remote: RemoteBlocks;
  socket: Socket | null;
  settled: boolean;
  /** [numBlocks, blockBytes] once every block arrived */
  data: Uint8Array | null;
  error: string | null;
  stats: KvPeerTransfer | null;
}

/** What the prefill side's block server asks of the connector. */
export interface BlockServerHandlers {
  /** a decode instance read the request's blocks, or will never read them (DONE) */
  done(requestId: string): void;
  /** a decode instance still waits to read this request (HEARTBEAT) */
  heartbeat(requestId: string): void;
  /** a READ: the asked blocks' bytes ([numBlocks, blockBytes]), or the refusal sent back; may throw (refused too) */
  read(json: Record<string, unknown>): Uint8Array | { readonly refused: string };
}

export interface PeerTransportOptions {
  /** bytes of one KV block (every layer's K and V) */
  readonly blockBytes: number;
  /** tokens per block */
  readonly blockSize: number;
  readonly nowMs: () => number;
  /** a read settled (its job's fields are set): the connector looks again */
  readonly onSettle: () => void;
  /** a notification could not be sent (vllm:nixl_num_failed_notifications) */
  readonly onNotifyFailed: () => void;
  readonly server: BlockServerHandlers;
}

export class PeerTransport {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private closed = false;

  constructor(private readonly options: PeerTransportOptions) {}

  /** Prefill side: opens the side channel; resolves with the port it listens on (0 asked: the one the system gave). */
  listen(host: string, port: number, hint: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const server = createServer((socket) => this.serve(socket));
      server.once("error", (e) => reject(new Error(`KV side channel: cannot listen on ${host}:${port}: ${errorMessage(e)} (${hint})`)));
      server.listen(port, host, () => {
        const address = server.address();
        this.server = server;
        resolve(address !== null && typeof address === "object" ? address.port : port);
      });
    });
  }

  /** Ends a read that has not settled (a timeout): its connection is dropped. */
  fail(job: BlockReadJob, error: string): void {
    if (job.settled) return;
    job.settled = true;
    job.error = error;
    job.socket?.destroy();
    this.options.onSettle();
  }

  /**
   * Decode side: one connection, READ, the block frames into one buffer, DONE.
   * @param descriptorsPerBlock contiguous regions per block (layers x K/V): NIXL's descriptors, for the transfer's stats
   */
  read(job: BlockReadJob, remoteBlockIds: readonly number[], descriptorsPerBlock: number): void {
    const blockBytes = this.options.blockBytes;
    const nowMs = this.options.nowMs;
    const data = new Uint8Array(remoteBlockIds.length * blockBytes); // [numBlocks, blockBytes]
    let received = 0;
    let posted = 0;
    const t0 = nowMs();
    const reader = new FrameReader(MAX_BLOCK_FRAME_BYTES);
    const socket = connect({ host: job.remote.host, port: job.remote.port });
    job.socket = socket;
    this.sockets.add(socket);
    socket.on("close", () => {
      this.sockets.delete(socket);
      this.fail(job, received < data.length ? `the connection closed after ${received} of ${data.length} bytes` : "the connection closed");
    });
    socket.on("error", (e) => this.fail(job, errorMessage(e)));
    socket.on("connect", () => {
      const request: ReadRequest = {
        engine_id: job.remote.engineId, request_id: job.remote.requestId, block_ids: remoteBlockIds, block_bytes: blockBytes, block_size: this.options.blockSize,
      };
      socket.write(controlFrame(FRAME.read, request), () => { posted = nowMs(); });
    });
    socket.on("data", (chunk: Buffer) => {
      if (job.settled) return;
      const frames = reader.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
      if (!frames.ok) { this.fail(job, frames.error); return; }
      for (const frame of frames.value) {
        if (frame.type === FRAME.error) { this.fail(job, String(frame.json["message"] ?? "the prefill instance refused the read")); return; }
        if (frame.type !== FRAME.blocks) { this.fail(job, `unexpected frame type ${frame.type}`); return; }
        const at = frame.firstBlock * blockBytes;
        if (frame.data.length !== frame.numBlocks * blockBytes || at + frame.data.length > data.length) { this.fail(job, "a block frame does not fit the blocks asked for"); return; }
        data.set(frame.data, at);
        received += frame.data.length;
      }
      if (received < data.length) return;
      const end = nowMs();
      job.data = data;
      job.stats = {
        seconds: (end - (posted || t0)) / 1000, postSeconds: ((posted || end) - t0) / 1000, bytes: data.length,
        descriptors: remoteBlockIds.length * descriptorsPerBlock,
      };
      job.settled = true;
      // the read notification: the prefill side frees its blocks
      socket.end(controlFrame(FRAME.done, { request_id: job.remote.requestId }));
      this.options.onSettle();
    });
  }

  /** One control frame on its own connection; a failure counts in vllm:nixl_num_failed_notifications. */
  notify(host: string, port: number, frame: Uint8Array): void {
    if (this.closed) return;
    const socket = connect({ host, port });
    this.sockets.add(socket);
    socket.on("connect", () => socket.end(frame));
    socket.on("error", () => this.options.onNotifyFailed());
    socket.on("close", () => this.sockets.delete(socket));
  }

  /** Prefill side: one connection from a decode instance. */
  private serve(socket: Socket): void {
    this.sockets.add(socket);
    const handlers = this.options.server;
    const reader = new FrameReader(0);
    socket.on("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    const refuse = (message: string): void => { socket.end(controlFrame(FRAME.error, { message })); };
    socket.on("data", (chunk: Buffer) => {
      const frames = reader.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
      if (!frames.ok) { refuse(frames.error); return; }
      for (const frame of frames.value) {
        if (frame.type === FRAME.done) {
          const id = frame.json["request_id"];
          if (typeof id === "string") handlers.done(id);
          continue;
        }
        if (frame.type === FRAME.heartbeat) {
          const ids = frame.json["request_ids"];
          if (Array.isArray(ids)) for (const id of ids) if (typeof id === "string") handlers.heartbeat(id);
          continue;
        }
        if (frame.type !== FRAME.read) { refuse(`unexpected frame type ${frame.type}`); return; }
        try {
          const answer = handlers.read(frame.json);
          if (answer instanceof Uint8Array) this.sendBlocks(socket, answer);
          else refuse(answer.refused);
        } catch (e) {
          refuse(`the prefill instance could not read its blocks: ${errorMessage(e)}`);
        }
      }
    });
  }

  /** The blocks of a READ, in frames of at most MAX_BLOCK_FRAME_BYTES. */
  private sendBlocks(socket: Socket, data: Uint8Array): void {
    const blockBytes = this.options.blockBytes;
    const numBlocks = data.length / blockBytes;
    const perFrame = Math.max(1, Math.floor(MAX_BLOCK_FRAME_BYTES / blockBytes));
    for (let b = 0; b < numBlocks; b += perFrame) {
      const n = Math.min(perFrame, numBlocks - b);
      const bytes = data.subarray(b * blockBytes, (b + n) * blockBytes);
      socket.write(blocksHeader(b, n, bytes.length));
      socket.write(bytes);
    }
  }

  /** Drops every connection and stops listening; nothing is sent afterwards. */
  close(): void {
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    this.server?.close();
  }
}
