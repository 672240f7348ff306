/**
 * A ZeroMQ PUB socket and a ROUTER socket over Bun's TCP / unix sockets, speaking ZMTP 3.x (zmtp.ts), with libzmq's
 * observable behaviour where the KV-event publisher relies on it:
 *
 * - PUB (libzmq xpub/pub + dist): a message goes to every ready peer whose subscriptions (counted prefixes of the
 *   first frame) match; nothing is sent before a peer has subscribed (ZeroMQ's "slow joiner"). When a peer already
 *   has `hwm` messages queued behind its kernel buffer, new messages are dropped for that peer only; a PUB never
 *   blocks its caller. hwm 0 means no limit (ZMQ_SNDHWM).
 * - ROUTER (libzmq router): each peer gets an identity (its `Identity` property, or 0x00 + a 4-byte counter as
 *   libzmq makes them); a received message is delivered as [identity, ...frames]; a sent message's first frame picks
 *   the peer, and a message to an unknown identity is dropped (ZMQ_ROUTER_MANDATORY off).
 * - bind: listen on the endpoint (port 0 / * picks a free one, see `endpoint`); connect: dial it, and dial again
 *   100 ms after a failure or a close (ZMQ_RECONNECT_IVL), until closed.
 */
import { existsSync, unlinkSync } from "node:fs";
import type { SocketHandler, TCPSocketListener, UnixSocketListener } from "bun";
import { err, ok, type Result } from "../util/result.ts";
import { type Endpoint, parseEndpoint } from "./zmq-endpoint.ts";
import { encodeFrames, ZmtpConnection, type ZmtpHandlers } from "./zmtp.ts";

const RECONNECT_IVL_MS = 100;

interface SocketData {
  conn?: ZmtpConnection;
}

type Listener = TCPSocketListener<SocketData> | UnixSocketListener<SocketData>;

/** The shared part: bind or connect, one ZmtpConnection per Bun socket. */
abstract class ZmqSocket implements ZmtpHandlers {
  protected readonly conns = new Set<ZmtpConnection>();
  private listener: Listener | null = null;
  private isClosed = false;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private boundEndpoint = "";

  protected constructor(private readonly ownType: "PUB" | "ROUTER") {}

  /** The endpoint as bound (port 0 / * replaced by the real port: libzmq ZMQ_LAST_ENDPOINT), or as connected. */
  get endpoint(): string {
    return this.boundEndpoint;
  }

  /** Whether any peer still has bytes the kernel has not taken. */
  hasQueued(): boolean {
    for (const c of this.conns) if (c.queuedMessages > 0) return true;
    return false;
  }

  /** Peers past the handshake. */
  get numPeers(): number {
    let n = 0;
    for (const c of this.conns) if (c.isReady) n++;
    return n;
  }

  abstract ready(conn: ZmtpConnection, peerType: string, props: Map<string, Uint8Array>): void;
  abstract message(conn: ZmtpConnection, frames: Uint8Array[]): void;
  abstract command(conn: ZmtpConnection, name: string, data: Uint8Array): void;

  closed(conn: ZmtpConnection): void {
    this.conns.delete(conn);
    this.forget(conn);
  }

  /** hook for subclasses: a connection went away */
  protected forget(_conn: ZmtpConnection): void {}

  private handler(onGone?: () => void): SocketHandler<SocketData> {
    return {
      open: (s) => {
        const conn = new ZmtpConnection(s, this.ownType, this);
        s.data = { conn };
        this.conns.add(conn);
      },
      data: (s, chunk) => s.data.conn?.onData(chunk),
      drain: (s) => s.data.conn?.onDrain(),
      close: (s) => {
        s.data.conn?.onClose("peer closed");
        onGone?.();
      },
      error: (s, e) => s.data.conn?.onClose(`socket error: ${e.message}`),
    };
  }

  /** Listens on `endpoint` (vLLM's bind side). */
  bind(endpoint: string): Result<string> {
    const parsed = parseEndpoint(endpoint);
    if (!parsed.ok) return parsed;
    try {
      const e = parsed.value;
      if (e.transport === "ipc") {
        // libzmq removes a stale socket file before binding
        if (existsSync(e.path)) unlinkSync(e.path);
        this.listener = Bun.listen<SocketData>({ unix: e.path, socket: this.handler(), data: {} });
        this.boundEndpoint = endpoint;
      } else {
        const l = Bun.listen<SocketData>({ hostname: e.host, port: e.port, socket: this.handler(), data: {} });
        this.listener = l;
        const host = e.host.includes(":") ? `[${e.host}]` : e.host;
        this.boundEndpoint = `tcp://${host}:${l.port}`;
      }
    } catch (e) {
      return err(`cannot bind ${endpoint}: ${(e as Error).message}`);
    }
    return ok(this.boundEndpoint);
  }

  /** Dials `endpoint` now and again after every loss (vLLM's connect side). */
  connect(endpoint: string): Result<string> {
    const parsed = parseEndpoint(endpoint);
    if (!parsed.ok) return parsed;
    if (parsed.value.transport === "tcp" && parsed.value.port === 0) return err(`cannot connect to ${endpoint}: it names no port`);
    this.boundEndpoint = endpoint;
    this.dial(parsed.value);
    return ok(endpoint);
  }

  private dial(e: Endpoint): void {
    if (this.isClosed) return;
    const retry = (): void => {
      if (this.isClosed || this.reconnectTimer !== null) return;
      this.reconnectTimer = setTimeout(() => {
        this.reconnectTimer = null;
        this.dial(e);
      }, RECONNECT_IVL_MS);
    };
    const socket: SocketHandler<SocketData> = { ...this.handler(retry), connectError: () => retry() };
    const dialing = e.transport === "ipc"
      ? Bun.connect<SocketData>({ unix: e.path, socket, data: {} })
      : Bun.connect<SocketData>({ hostname: e.host, port: e.port, socket, data: {} });
    dialing.catch(() => retry());
  }

  /** Stops listening / dialling and drops every connection (linger 0, as vLLM closes its sockets). */
  close(): void {
    this.isClosed = true;
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    for (const c of [...this.conns]) c.close();
    this.conns.clear();
    if (this.listener !== null) {
      this.listener.stop(true);
      const unix = (this.listener as { unix?: string }).unix;
      if (typeof unix === "string" && existsSync(unix)) unlinkSync(unix);
      this.listener = null;
    }
  }
}

const startsWith = (data: Uint8Array, prefix: Uint8Array): boolean => {
  if (prefix.length > data.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[i] !== prefix[i]) return false;
  return true;
};

/** The key of a subscription prefix in a Map (bytes as latin1 text). */
const prefixKey = (bytes: Uint8Array): string => Buffer.from(bytes).toString("latin1");

export class PubSocket extends ZmqSocket {
  /** per peer: subscribed prefix -> how many times (SUBSCRIBE twice, CANCEL once: still subscribed) */
  private readonly subs = new Map<ZmtpConnection, Map<string, { prefix: Uint8Array; count: number }>>();
  /** messages dropped because a peer was at its high-water mark */
  droppedAtHwm = 0;

  constructor(private readonly hwm: number) {
    super("PUB");
  }

  ready(conn: ZmtpConnection): void {
    this.subs.set(conn, new Map());
  }

  protected override forget(conn: ZmtpConnection): void {
    this.subs.delete(conn);
  }

  /** Peers with at least one subscription. */
  get numSubscribers(): number {
    let n = 0;
    for (const s of this.subs.values()) if (s.size > 0) n++;
    return n;
  }

  /** A ZMTP 3.0 subscriber: 0x01 + prefix subscribes, 0x00 + prefix cancels; anything else is dropped (libzmq pub). */
  message(conn: ZmtpConnection, frames: Uint8Array[]): void {
    const first = frames[0];
    if (frames.length !== 1 || first === undefined || first.length === 0) return;
    if (first[0] === 1) this.subscribe(conn, first.subarray(1), +1);
    else if (first[0] === 0) this.subscribe(conn, first.subarray(1), -1);
  }

  /** A ZMTP 3.1 subscriber: SUBSCRIBE / CANCEL commands carry the prefix. */
  command(conn: ZmtpConnection, name: string, data: Uint8Array): void {
    if (name === "SUBSCRIBE") this.subscribe(conn, data, +1);
    else if (name === "CANCEL") this.subscribe(conn, data, -1);
  }

  private subscribe(conn: ZmtpConnection, prefix: Uint8Array, delta: number): void {
    const table = this.subs.get(conn);
    if (!table) return;
    const key = prefixKey(prefix);
    const entry = table.get(key);
    if (delta > 0) {
      if (entry) entry.count++;
      else table.set(key, { prefix: prefix.slice(), count: 1 });
    } else if (entry) {
      if (--entry.count === 0) table.delete(key);
    }
  }

  /** Sends one message to every matching subscriber; returns how many peers it went to. */
  send(frames: readonly Uint8Array[]): number {
    const topic = frames[0] ?? new Uint8Array(0);
    let encoded: Uint8Array | null = null;
    let sent = 0;
    for (const [conn, table] of this.subs) {
      if (!conn.isReady) continue;
      let match = false;
      for (const { prefix } of table.values()) {
        if (startsWith(topic, prefix)) {
          match = true;
          break;
        }
      }
      if (!match) continue;
      if (this.hwm > 0 && conn.queuedMessages >= this.hwm) {
        this.droppedAtHwm++;
        continue;
      }
      encoded ??= encodeFrames(frames);
      conn.sendEncoded(encoded);
      sent++;
    }
    return sent;
  }
}

export class RouterSocket extends ZmqSocket {
  private readonly byId = new Map<string, ZmtpConnection>();
  private readonly idOf = new Map<ZmtpConnection, Uint8Array>();
  /** libzmq's generated identities: 0x00 then a 4-byte counter that starts at a random value */
  private nextId = Math.floor(Math.random() * 0xffffffff) >>> 0;

  constructor(private readonly onMessage: (frames: Uint8Array[]) => void) {
    super("ROUTER");
  }

  ready(conn: ZmtpConnection, _peerType: string, props: Map<string, Uint8Array>): void {
    let id = props.get("identity");
    // an empty identity, or one already taken by a live peer, gets a generated one (libzmq: the new peer is refused a
    // duplicate unless ZMQ_ROUTER_HANDOVER; a fresh id keeps both reachable)
    if (!id || id.length === 0 || id[0] === 0 || this.byId.has(prefixKey(id))) {
      id = new Uint8Array(5);
      new DataView(id.buffer).setUint32(1, this.nextId++ >>> 0, false);
      this.nextId >>>= 0;
    }
    this.byId.set(prefixKey(id), conn);
    this.idOf.set(conn, id);
  }

  protected override forget(conn: ZmtpConnection): void {
    const id = this.idOf.get(conn);
    if (id) this.byId.delete(prefixKey(id));
    this.idOf.delete(conn);
  }

  message(conn: ZmtpConnection, frames: Uint8Array[]): void {
    const id = this.idOf.get(conn);
    if (id) this.onMessage([id, ...frames]);
  }

  command(): void {}

  /** Sends frames[1..] to the peer named by frames[0]; false when there is no such peer (dropped). */
  send(frames: readonly Uint8Array[]): boolean {
    const conn = frames[0] && this.byId.get(prefixKey(frames[0]));
    if (!conn || !conn.isReady) return false;
    conn.send(frames.slice(1));
    return true;
  }
}
