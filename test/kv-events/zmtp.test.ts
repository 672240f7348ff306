/**
 * ZMTP 3.x framing and handshake (rfc.zeromq.org 23 / 37) on a fake byte socket, and the PUB / ROUTER rules on top of
 * it (subscriptions, prefix filtering, high-water mark, identities). The real-libzmq side is python-subscriber.test.ts.
 */
import { describe, expect, test } from "bun:test";
import {
  type ByteSocket,
  decodeGreeting,
  decodeProperties,
  encodeCommand,
  encodeFrames,
  encodeGreeting,
  encodeProperties,
  type Frame,
  FrameReader,
  ZmtpConnection,
  type ZmtpHandlers,
} from "../../src/kv-events/zmtp.ts";
import { PubSocket, RouterSocket } from "../../src/kv-events/zmq-sockets.ts";

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const str = (b: Uint8Array): string => new TextDecoder().decode(b);

/** A socket whose kernel takes `room` more bytes (Infinity: everything). */
class FakeSocket implements ByteSocket {
  written: number[] = [];
  ended = false;
  constructor(public room = Infinity) {}
  write(data: Uint8Array): number {
    if (this.ended) return -1;
    const n = Math.min(data.length, this.room);
    this.room -= n;
    for (let i = 0; i < n; i++) this.written.push(data[i]!);
    return n;
  }
  end(): void {
    this.ended = true;
  }
  /** everything written after the 64-byte greeting, as frames */
  frames(): Frame[] {
    const r = new FrameReader();
    r.push(Uint8Array.from(this.written.slice(64)));
    const out: Frame[] = [];
    for (let f = r.next(); f !== null && typeof f !== "string"; f = r.next()) out.push(f);
    return out;
  }
}

const ready = (type: string, extra: Record<string, string> = {}): Uint8Array => encodeCommand("READY", encodeProperties({ "Socket-Type": type, ...extra }));

function recorder(): ZmtpHandlers & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    ready: (_c, type) => log.push(`ready ${type}`),
    message: (_c, frames) => log.push(`message ${frames.map(str).join("|")}`),
    command: (_c, name, data) => log.push(`command ${name} ${str(data)}`),
    closed: (_c, reason) => log.push(`closed ${reason}`),
  };
}

describe("codec", () => {
  test("the greeting is 64 bytes: signature, version 3.1, NULL, not a server", () => {
    const g = encodeGreeting();
    expect(g.length).toBe(64);
    expect([g[0], g[9], g[10], g[11], g[32]]).toEqual([0xff, 0x7f, 3, 1, 0]);
    expect(str(g.subarray(12, 16))).toBe("NULL");
    expect(decodeGreeting(g)).toEqual({ major: 3, minor: 1, mechanism: "NULL" });
  });

  test("ZMTP 1/2 and broken signatures are refused", () => {
    const old = encodeGreeting();
    old[10] = 2;
    expect(decodeGreeting(old)).toContain("not supported");
    const bad = encodeGreeting();
    bad[0] = 0x01;
    expect(decodeGreeting(bad)).toContain("bad signature");
  });

  test("short frames: flags + 1-byte size; MORE on all but the last", () => {
    expect([...encodeFrames([bytes("ab"), bytes("c")])]).toEqual([0x01, 2, 0x61, 0x62, 0x00, 1, 0x63]);
  });

  test("a body over 255 bytes is LONG with an 8-byte big-endian size", () => {
    const f = encodeFrames([new Uint8Array(300)]);
    expect([...f.subarray(0, 9)]).toEqual([0x02, 0, 0, 0, 0, 0, 0, 0x01, 0x2c]);
    expect(f.length).toBe(309);
  });

  test("commands: COMMAND flag, name length, name, data; properties round-trip case-insensitively", () => {
    const c = encodeCommand("READY", encodeProperties({ "Socket-Type": "PUB", Identity: new Uint8Array(0) }));
    expect(c[0]).toBe(0x04);
    const r = new FrameReader();
    r.push(c);
    const f = r.next() as Frame;
    expect(f.command).toBe(true);
    expect(str(f.body.subarray(1, 6))).toBe("READY");
    const props = decodeProperties(f.body.subarray(6)) as Map<string, Uint8Array>;
    expect(str(props.get("socket-type")!)).toBe("PUB");
    expect(props.get("identity")!.length).toBe(0);
  });

  test("the reader reassembles frames from single bytes", () => {
    const wire = encodeFrames([bytes("topic"), new Uint8Array(1000).fill(7), bytes("")]);
    const r = new FrameReader();
    const got: Frame[] = [];
    for (const b of wire) {
      r.push(Uint8Array.of(b));
      for (let f = r.next(); f !== null; f = r.next()) got.push(f as Frame);
    }
    expect(got.map((f) => [f.more, f.body.length])).toEqual([[true, 5], [true, 1000], [false, 0]]);
  });

  test("reserved flag bits and oversized frames are protocol errors", () => {
    const r = new FrameReader();
    r.push(Uint8Array.of(0x10, 0));
    expect(typeof r.next()).toBe("string");
    const big = new FrameReader();
    big.push(Uint8Array.of(0x02, 0, 0, 0, 1, 0, 0, 0, 0));
    expect(big.next()).toContain("limit");
  });
});

describe("handshake", () => {
  test("greeting first, READY with Socket-Type after the peer's greeting, ready after the peer's READY", () => {
    const sock = new FakeSocket();
    const h = recorder();
    const conn = new ZmtpConnection(sock, "PUB", h);
    expect(sock.written.length).toBe(64);
    conn.onData(encodeGreeting());
    const frames = sock.frames();
    expect(frames.length).toBe(1);
    expect(str(frames[0]!.body.subarray(1, 6))).toBe("READY");
    const props = decodeProperties(frames[0]!.body.subarray(6)) as Map<string, Uint8Array>;
    expect(str(props.get("socket-type")!)).toBe("PUB");
    expect(conn.isReady).toBe(false);
    conn.onData(ready("SUB"));
    expect(conn.isReady).toBe(true);
    expect(h.log).toEqual(["ready SUB"]);
  });

  test("greeting and READY split anywhere still handshake", () => {
    const conn = new ZmtpConnection(new FakeSocket(), "ROUTER", recorder());
    const wire = Uint8Array.from([...encodeGreeting(), ...ready("DEALER")]);
    for (let i = 0; i < wire.length; i += 7) conn.onData(wire.subarray(i, i + 7));
    expect(conn.isReady).toBe(true);
  });

  test("a ROUTER also sends an Identity property, as libzmq does", () => {
    const sock = new FakeSocket();
    new ZmtpConnection(sock, "ROUTER", recorder()).onData(encodeGreeting());
    const props = decodeProperties(sock.frames()[0]!.body.subarray(6)) as Map<string, Uint8Array>;
    expect(str(props.get("socket-type")!)).toBe("ROUTER");
    expect(props.has("identity")).toBe(true);
  });

  test.each([
    ["PUB", "PUB"],
    ["PUB", "DEALER"],
    ["ROUTER", "SUB"],
  ] as const)("a %s hangs up on a %s peer", (own, peer) => {
    const sock = new FakeSocket();
    const h = recorder();
    const conn = new ZmtpConnection(sock, own, h);
    conn.onData(Uint8Array.from([...encodeGreeting(), ...ready(peer)]));
    expect(conn.isReady).toBe(false);
    expect(sock.ended).toBe(true);
    expect(h.log[0]).toContain(`does not talk to ${peer}`);
  });

  test("a peer asking for CURVE gets an ERROR command and is closed", () => {
    const sock = new FakeSocket();
    const h = recorder();
    const g = encodeGreeting();
    g.set(bytes("CURVE"), 12);
    new ZmtpConnection(sock, "PUB", h).onData(g);
    const f = sock.frames()[0]!;
    expect(str(f.body.subarray(1, 6))).toBe("ERROR");
    expect(sock.ended).toBe(true);
    expect(h.log[0]).toContain("CURVE");
  });

  test("PING is answered with PONG carrying the ping's context", () => {
    const sock = new FakeSocket();
    const conn = new ZmtpConnection(sock, "PUB", recorder());
    conn.onData(Uint8Array.from([...encodeGreeting(), ...ready("SUB")]));
    conn.onData(encodeCommand("PING", Uint8Array.from([0, 10, ...bytes("ctx")])));
    const pong = sock.frames().at(-1)!;
    expect(str(pong.body)).toBe("\x04PONGctx");
  });

  test("a message before the handshake is a protocol error", () => {
    const sock = new FakeSocket();
    const conn = new ZmtpConnection(sock, "PUB", recorder());
    conn.onData(Uint8Array.from([...encodeGreeting(), ...encodeFrames([bytes("\x01")])]));
    expect(sock.ended).toBe(true);
  });

  test("multi-frame messages are delivered whole", () => {
    const h = recorder();
    const conn = new ZmtpConnection(new FakeSocket(), "ROUTER", h);
    conn.onData(Uint8Array.from([...encodeGreeting(), ...ready("DEALER"), ...encodeFrames([bytes(""), bytes("x"), bytes("y")])]));
    expect(h.log).toEqual(["ready DEALER", "message |x|y"]);
  });
});

/** what a PUB writes before any message: its greeting and its READY */
const PUB_HANDSHAKE_BYTES = 64 + encodeCommand("READY", encodeProperties({ "Socket-Type": "PUB" })).length;

/** A PUB socket with one fake SUB peer past the handshake. */
function pubWithPeer(hwm: number, room = Infinity) {
  const pub = new PubSocket(hwm);
  const sock = new FakeSocket(room);
  const conn = new ZmtpConnection(sock, "PUB", pub);
  conn.onData(Uint8Array.from([...encodeGreeting(), ...ready("SUB")]));
  const sent = () => sock.frames().slice(1).filter((f) => !f.command);
  return { pub, sock, conn, sent };
}

describe("PUB", () => {
  test("nothing goes to a peer before it subscribes (slow joiner)", () => {
    const { pub, sent } = pubWithPeer(10);
    expect(pub.send([bytes("kv"), bytes("1")])).toBe(0);
    expect(sent().length).toBe(0);
  });

  test("ZMTP 3.1 SUBSCRIBE commands and ZMTP 3.0 0x01 messages both subscribe; prefixes filter the first frame", () => {
    const a = pubWithPeer(10);
    a.conn.onData(encodeCommand("SUBSCRIBE", bytes("kv")));
    expect(a.pub.send([bytes("kv@pod"), bytes("x")])).toBe(1);
    expect(a.pub.send([bytes("other"), bytes("x")])).toBe(0);
    const b = pubWithPeer(10);
    b.conn.onData(encodeFrames([bytes("\x01")]));
    expect(b.pub.send([bytes("anything"), bytes("x")])).toBe(1);
    expect(b.sent().map((f) => str(f.body))).toEqual(["anything", "x"]);
  });

  test("subscriptions are counted: two SUBSCRIBEs need two CANCELs", () => {
    const { pub, conn } = pubWithPeer(10);
    conn.onData(encodeCommand("SUBSCRIBE", bytes("")));
    conn.onData(encodeFrames([bytes("\x01")]));
    conn.onData(encodeCommand("CANCEL", bytes("")));
    expect(pub.send([bytes("t")])).toBe(1);
    conn.onData(encodeFrames([bytes("\x00")]));
    expect(pub.send([bytes("t")])).toBe(0);
    expect(pub.numSubscribers).toBe(0);
  });

  test("a peer at its high-water mark loses new messages; the caller never waits", () => {
    // the kernel takes the greeting and READY, then nothing
    const { pub, sock, conn } = pubWithPeer(3, PUB_HANDSHAKE_BYTES);
    conn.onData(encodeCommand("SUBSCRIBE", bytes("")));
    for (let i = 0; i < 10; i++) pub.send([bytes("t"), bytes(String(i))]);
    expect(conn.queuedMessages).toBe(3);
    expect(pub.droppedAtHwm).toBe(7);
    // room again: the three queued messages go out in order, the dropped ones never
    sock.room = Infinity;
    conn.onDrain();
    expect(conn.queuedMessages).toBe(0);
    const sent = sock.frames().filter((f) => !f.command).map((f) => str(f.body));
    expect(sent.slice(-6)).toEqual(["t", "0", "t", "1", "t", "2"]);
  });

  test("hwm 0 never drops", () => {
    const { pub, conn } = pubWithPeer(0, PUB_HANDSHAKE_BYTES);
    conn.onData(encodeCommand("SUBSCRIBE", bytes("")));
    for (let i = 0; i < 500; i++) pub.send([bytes("t")]);
    expect(conn.queuedMessages).toBe(500);
    expect(pub.droppedAtHwm).toBe(0);
  });
});

describe("ROUTER", () => {
  function peer(router: RouterSocket, identity?: string) {
    const sock = new FakeSocket();
    const conn = new ZmtpConnection(sock, "ROUTER", router);
    conn.onData(Uint8Array.from([...encodeGreeting(), ...ready("DEALER", identity === undefined ? {} : { Identity: identity })]));
    return { sock, conn };
  }

  test("messages arrive as [identity, ...frames] and replies route by identity", () => {
    const got: Uint8Array[][] = [];
    const router = new RouterSocket((frames) => got.push(frames));
    const a = peer(router);
    const b = peer(router, "bee");
    a.conn.onData(encodeFrames([bytes(""), bytes("A")]));
    b.conn.onData(encodeFrames([bytes(""), bytes("B")]));
    const [idA, idB] = [got[0]![0]!, got[1]![0]!];
    // a generated identity is 0x00 + 4 bytes (libzmq); a given one is kept
    expect(idA.length).toBe(5);
    expect(idA[0]).toBe(0);
    expect(str(idB)).toBe("bee");
    expect(router.send([idB, bytes(""), bytes("to-b")])).toBe(true);
    expect(b.sock.frames().filter((f) => !f.command).map((f) => str(f.body))).toEqual(["", "to-b"]);
    expect(a.sock.frames().filter((f) => !f.command).length).toBe(0);
  });

  test("a reply to an unknown or departed peer is dropped", () => {
    const router = new RouterSocket(() => {});
    const b = peer(router, "bee");
    b.conn.onClose("gone");
    expect(router.send([bytes("bee"), bytes("x")])).toBe(false);
    expect(router.send([bytes("nobody"), bytes("x")])).toBe(false);
  });
});
