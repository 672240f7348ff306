/**
 * ZMTP 3.x, the ZeroMQ wire protocol (rfc.zeromq.org 23 ZMTP 3.0 and 37 ZMTP 3.1), with the NULL security mechanism:
 * enough for a PUB and a ROUTER socket that libzmq peers (pyzmq, Go's zmq4, llm-d-kv-cache) talk to unchanged.
 *
 *   greeting (64 bytes): FF 00*8 7F | 03 01 | "NULL" + 16 zero bytes | as-server 00 | 31 zero bytes
 *   frame: flags (MORE 0x01, LONG 0x02, COMMAND 0x04) | size (1 byte, or 8 bytes big-endian when LONG) | body
 *   command body: name length (1 byte) | name | data;   READY data: properties, each
 *   name length (1 byte) | name | value length (4 bytes big-endian) | value
 *
 * Both sides send their whole greeting at once (libzmq sends it in two parts but reads it however it arrives), then
 * READY with `Socket-Type` (and `Identity` for a ROUTER, as libzmq does). A ZMTP 3.1 SUB sends subscriptions as
 * SUBSCRIBE / CANCEL commands, a 3.0 one as messages whose first byte is 1 / 0: both are accepted. PING is answered
 * with PONG (libzmq heartbeats, ZMTP 3.1).
 *
 * `ZmtpConnection` runs the handshake over one Bun socket and queues what the kernel does not take yet (the caller
 * counts queued messages for its high-water mark). No security mechanism other than NULL is offered.
 */

export const GREETING_SIZE = 64;
const FLAG_MORE = 0x01;
const FLAG_LONG = 0x02;
const FLAG_COMMAND = 0x04;
/** an inbound message larger than this closes the connection: peers send subscriptions and replay requests only */
const MAX_INBOUND_BYTES = 1 << 20;

/** Which socket types may talk to which (ZMTP 3.0 "The Socket Types"). */
export const PEER_TYPES: Readonly<Record<string, readonly string[]>> = {
  PUB: ["SUB", "XSUB"],
  ROUTER: ["REQ", "DEALER", "ROUTER"],
};

const text = new TextEncoder();
const untext = new TextDecoder();

/** Our greeting: ZMTP 3.1, mechanism NULL, not a server. */
export function encodeGreeting(): Uint8Array {
  const g = new Uint8Array(GREETING_SIZE);
  g[0] = 0xff;
  g[9] = 0x7f;
  g[10] = 3;
  g[11] = 1;
  g.set(text.encode("NULL"), 12);
  return g;
}

export interface Greeting {
  readonly major: number;
  readonly minor: number;
  readonly mechanism: string;
}

/** The peer's greeting, or a reason to hang up. */
export function decodeGreeting(g: Uint8Array): Greeting | string {
  if (g.length < GREETING_SIZE) return "greeting too short";
  if (g[0] !== 0xff || (g[9]! & 1) !== 1) return "not a ZMTP 3 greeting (bad signature)";
  if (g[10]! < 3) return `ZMTP ${g[10]}.x peers are not supported (need 3.x)`;
  const mech = g.subarray(12, 32);
  const end = mech.indexOf(0);
  return { major: g[10]!, minor: g[11]!, mechanism: untext.decode(end < 0 ? mech : mech.subarray(0, end)) };
}

/** One message's frames on the wire: MORE on all but the last, LONG when a body is over 255 bytes. */
export function encodeFrames(frames: readonly Uint8Array[], command = false): Uint8Array {
  let size = 0;
  for (const f of frames) size += (f.length > 255 ? 9 : 2) + f.length;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let at = 0;
  frames.forEach((f, i) => {
    const long = f.length > 255;
    out[at++] = (i < frames.length - 1 ? FLAG_MORE : 0) | (long ? FLAG_LONG : 0) | (command ? FLAG_COMMAND : 0);
    if (long) {
      view.setBigUint64(at, BigInt(f.length), false);
      at += 8;
    } else out[at++] = f.length;
    out.set(f, at);
    at += f.length;
  });
  return out;
}

/** A command frame: its name, then its data. */
export function encodeCommand(name: string, data: Uint8Array = new Uint8Array(0)): Uint8Array {
  const n = text.encode(name);
  const body = new Uint8Array(1 + n.length + data.length);
  body[0] = n.length;
  body.set(n, 1);
  body.set(data, 1 + n.length);
  return encodeFrames([body], true);
}

/** READY's metadata properties. */
export function encodeProperties(props: Readonly<Record<string, Uint8Array | string>>): Uint8Array {
  const parts: number[] = [];
  for (const [name, value] of Object.entries(props)) {
    const n = text.encode(name);
    const v = typeof value === "string" ? text.encode(value) : value;
    parts.push(n.length, ...n, (v.length >>> 24) & 0xff, (v.length >>> 16) & 0xff, (v.length >>> 8) & 0xff, v.length & 0xff, ...v);
  }
  return Uint8Array.from(parts);
}

/** Property names are case-insensitive (ZMTP 3.0): keys are lower-cased. */
export function decodeProperties(data: Uint8Array): Map<string, Uint8Array> | string {
  const out = new Map<string, Uint8Array>();
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let at = 0;
  while (at < data.length) {
    const nameLen = data[at]!;
    if (at + 1 + nameLen + 4 > data.length) return "truncated metadata";
    const name = untext.decode(data.subarray(at + 1, at + 1 + nameLen)).toLowerCase();
    const valueLen = view.getUint32(at + 1 + nameLen, false);
    const start = at + 1 + nameLen + 4;
    if (start + valueLen > data.length) return "truncated metadata";
    out.set(name, data.subarray(start, start + valueLen));
    at = start + valueLen;
  }
  return out;
}

export type Frame = { readonly command: boolean; readonly more: boolean; readonly body: Uint8Array };

/** Splits a byte stream into frames, however the chunks arrive. */
export class FrameReader {
  private buf = new Uint8Array(0);

  push(chunk: Uint8Array): void {
    const next = new Uint8Array(this.buf.length + chunk.length);
    next.set(this.buf);
    next.set(chunk, this.buf.length);
    this.buf = next;
  }

  /** The next `n` raw bytes (the greeting), or null until they are all here. */
  take(n: number): Uint8Array | null {
    if (this.buf.length < n) return null;
    const out = this.buf.slice(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** The next whole frame, null until it is all here, or a reason to hang up. */
  next(): Frame | null | string {
    if (this.buf.length < 2) return null;
    const flags = this.buf[0]!;
    if ((flags & 0xf8) !== 0) return `bad frame flags 0x${flags.toString(16)}`;
    const long = (flags & FLAG_LONG) !== 0;
    const head = long ? 9 : 2;
    if (this.buf.length < head) return null;
    const size = long ? new DataView(this.buf.buffer, this.buf.byteOffset + 1, 8).getBigUint64(0, false) : BigInt(this.buf[1]!);
    if (size > BigInt(MAX_INBOUND_BYTES)) return `frame of ${size} bytes is over the ${MAX_INBOUND_BYTES}-byte limit`;
    const end = head + Number(size);
    if (this.buf.length < end) return null;
    const body = this.buf.slice(head, end);
    this.buf = this.buf.subarray(end);
    return { command: (flags & FLAG_COMMAND) !== 0, more: (flags & FLAG_MORE) !== 0, body };
  }
}

/** What a connection tells its socket. */
export interface ZmtpHandlers {
  /** the handshake is done: the peer's socket type and properties */
  ready(conn: ZmtpConnection, peerType: string, props: Map<string, Uint8Array>): void;
  /** one whole message (all its frames) */
  message(conn: ZmtpConnection, frames: Uint8Array[]): void;
  /** a command other than READY / PING / PONG / ERROR (SUBSCRIBE, CANCEL) */
  command(conn: ZmtpConnection, name: string, data: Uint8Array): void;
  /** the connection is gone (either side closed it, or a protocol error) */
  closed(conn: ZmtpConnection, reason: string): void;
}

/** The byte stream a connection runs over (a Bun TCP or unix socket). */
export interface ByteSocket {
  /** bytes the kernel took (fewer than asked: the rest waits for drain), or -1 when the socket is closed */
  write(data: Uint8Array): number;
  end(): void;
}

type State = "greeting" | "handshake" | "ready" | "closed";

/** One ZMTP connection over one Bun socket, in either direction. */
export class ZmtpConnection {
  private state: State = "greeting";
  private readonly reader = new FrameReader();
  /** encoded messages the kernel has not taken yet, oldest first (the first may be partly written) */
  private readonly pending: Uint8Array[] = [];
  private inbound: Uint8Array[] = [];
  private inboundBytes = 0;
  peerMinor = 0;
  peerType = "";

  constructor(
    readonly socket: ByteSocket,
    private readonly ownType: "PUB" | "ROUTER",
    private readonly handlers: ZmtpHandlers,
  ) {
    this.write(encodeGreeting());
  }

  get isClosed(): boolean {
    return this.state === "closed";
  }

  get isReady(): boolean {
    return this.state === "ready";
  }

  /** messages queued behind the kernel's buffer: what the high-water mark counts */
  get queuedMessages(): number {
    return this.pending.length;
  }

  /** Sends one message (ready connections only). */
  send(frames: readonly Uint8Array[]): void {
    if (this.state === "ready") this.write(encodeFrames(frames));
  }

  /** Sends one message already encoded with encodeFrames (a PUB encodes once for all its subscribers). */
  sendEncoded(message: Uint8Array): void {
    if (this.state === "ready") this.write(message);
  }

  /** Bun's `data` callback. */
  onData(chunk: Uint8Array): void {
    if (this.state === "closed") return;
    this.reader.push(chunk);
    if (this.state === "greeting") {
      const g = this.reader.take(GREETING_SIZE);
      if (g === null) return;
      const greeting = decodeGreeting(g);
      if (typeof greeting === "string") return this.fail(greeting);
      if (greeting.mechanism !== "NULL") {
        const reason = text.encode("unsupported mechanism");
        this.write(encodeCommand("ERROR", Uint8Array.from([reason.length, ...reason])));
        return this.fail(`peer asks for the ${greeting.mechanism} mechanism; only NULL is offered`);
      }
      this.peerMinor = greeting.minor;
      const props: Record<string, string | Uint8Array> = { "Socket-Type": this.ownType };
      if (this.ownType === "ROUTER") props["Identity"] = new Uint8Array(0);
      this.write(encodeCommand("READY", encodeProperties(props)));
      this.state = "handshake";
    }
    for (;;) {
      const frame = this.reader.next();
      if (frame === null) return;
      if (typeof frame === "string") return this.fail(frame);
      if (frame.command) this.onCommand(frame.body);
      else this.onFrame(frame);
      if (this.isClosed) return;
    }
  }

  /** Bun's `drain` callback: the kernel has room again. */
  onDrain(): void {
    while (this.pending.length > 0) {
      const head = this.pending[0]!;
      const n = this.socket.write(head);
      if (n < 0) return this.fail("write failed");
      if (n < head.length) {
        this.pending[0] = head.subarray(n);
        return;
      }
      this.pending.shift();
    }
  }

  /** Bun's `close` / `error` callbacks, or ours. */
  onClose(reason: string): void {
    if (this.state === "closed") return;
    this.state = "closed";
    this.pending.length = 0;
    this.handlers.closed(this, reason);
  }

  close(): void {
    this.onClose("closed");
    this.socket.end();
  }

  private fail(reason: string): void {
    this.onClose(reason);
    this.socket.end();
  }

  private write(bytes: Uint8Array): void {
    if (this.pending.length > 0) {
      this.pending.push(bytes);
      return;
    }
    const n = this.socket.write(bytes);
    if (n < 0) return this.fail("write failed");
    if (n < bytes.length) this.pending.push(bytes.subarray(n));
  }

  private onCommand(body: Uint8Array): void {
    if (body.length < 1 || body.length < 1 + body[0]!) return this.fail("malformed command");
    const name = untext.decode(body.subarray(1, 1 + body[0]!));
    const data = body.subarray(1 + body[0]!);
    if (this.state === "handshake") {
      if (name !== "READY") return this.fail(`expected READY, got ${name}`);
      const props = decodeProperties(data);
      if (typeof props === "string") return this.fail(props);
      const type = untext.decode(props.get("socket-type") ?? new Uint8Array(0));
      if (!PEER_TYPES[this.ownType]!.includes(type)) return this.fail(`a ${this.ownType} socket does not talk to ${type || "an untyped peer"}`);
      this.peerType = type;
      this.state = "ready";
      this.handlers.ready(this, type, props);
      return;
    }
    if (name === "PING") {
      // PING: TTL (2 bytes) then up to 16 bytes of context, echoed in PONG
      this.write(encodeCommand("PONG", data.subarray(2)));
      return;
    }
    if (name === "PONG") return;
    if (name === "ERROR") return this.fail(`peer error: ${untext.decode(data.subarray(1, 1 + (data[0] ?? 0)))}`);
    this.handlers.command(this, name, data);
  }

  private onFrame(frame: Frame): void {
    if (this.state !== "ready") return this.fail("message before the handshake finished");
    this.inboundBytes += frame.body.length;
    if (this.inboundBytes > MAX_INBOUND_BYTES) return this.fail("inbound message too large");
    this.inbound.push(frame.body);
    if (frame.more) return;
    const frames = this.inbound;
    this.inbound = [];
    this.inboundBytes = 0;
    this.handlers.message(this, frames);
  }
}
