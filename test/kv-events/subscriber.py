#!/usr/bin/python3
"""An independent KV-event consumer on libzmq (Debian python3-zmq) and msgpack (python3-msgpack), written the way
vLLM's examples/features/kv_events/kv_events_subscriber.py and llm-d-kv-cache's pkg/kvevents read fennec's stream.

  subscriber.py sub ENDPOINT TOPIC COUNT      SUB: subscribe to TOPIC, print COUNT messages as JSON lines
  subscriber.py sub-bind ENDPOINT TOPIC COUNT the same, but the SUB binds and the publisher connects to it
  subscriber.py replay ENDPOINT START KIND    DEALER or REQ: ask the replay socket from START, print until the end marker
  subscriber.py collect ENDPOINT TOPIC IDLE   SUB: print every message until none came for IDLE seconds, then exit 0

Every message is decoded field by field against vLLM's event structs (kv_events.py): a missing or unexpected field,
a wrong type or a wrong frame count is printed as {"error": ...} and the script exits 1. Ints beyond 2^53 are printed
as strings so JavaScript reads them exactly; bytes as {"hex": ...}.
"""
import json
import sys

import msgpack
import zmq

# type -> (always-present fields, fields present only when not None)
FIELDS = {
    "BlockStored": (
        ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"],
        ["extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window", "locality"],
    ),
    "BlockRemoved": (["block_hashes", "medium"], ["group_idx", "locality"]),
    "AllBlocksCleared": ([], []),
}
END_SEQ = (-1).to_bytes(8, "big", signed=True)


def jsonable(v):
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, int):
        return str(v) if abs(v) > 2**53 else v
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    raise TypeError(f"unexpected {type(v).__name__}")


def check_hash(h, where):
    if isinstance(h, int):
        assert 0 <= h < 2**64, f"{where}: int hash out of uint64 range"
    else:
        assert isinstance(h, bytes) and len(h) == 32, f"{where}: hash is neither uint64 nor 32 bytes"


def decode(topic: bytes, seq: bytes, payload: bytes) -> dict:
    assert len(seq) == 8, f"seq frame has {len(seq)} bytes"
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    assert isinstance(batch, list) and len(batch) == 3, "batch is not [ts, events, data_parallel_rank]"
    ts, events, rank = batch
    assert isinstance(ts, float), f"ts is {type(ts).__name__}, not float"
    assert rank is None or isinstance(rank, int), "data_parallel_rank is not an int"
    out_events = []
    for e in events:
        assert isinstance(e, dict), "event is not a map"
        kind = e.get("type")
        assert kind in FIELDS, f"unknown event type {kind!r}"
        required, optional = FIELDS[kind]
        keys = [k for k in e if k != "type"]
        assert list(e)[0] == "type", "type is not the first key"
        for k in required:
            assert k in e, f"{kind}: missing {k}"
        for k in keys:
            assert k in required or k in optional, f"{kind}: unexpected field {k}"
            if k in optional:
                assert e[k] is not None, f"{kind}: {k} is None but should be omitted (omit_defaults)"
        if kind != "AllBlocksCleared":
            for h in e["block_hashes"]:
                check_hash(h, kind)
            assert e["medium"] is None or isinstance(e["medium"], str)
        if kind == "BlockStored":
            if e["parent_block_hash"] is not None:
                check_hash(e["parent_block_hash"], "parent_block_hash")
            assert all(isinstance(t, int) for t in e["token_ids"]), "token_ids are not ints"
            assert isinstance(e["block_size"], int)
            if "extra_keys" in e:
                assert len(e["extra_keys"]) == len(e["block_hashes"]), "extra_keys is not one entry per hash"
        out_events.append(jsonable(e))
    return {"topic": topic.decode(), "seq": int.from_bytes(seq, "big"), "ts": ts, "rank": rank, "events": out_events}


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    mode, endpoint = sys.argv[1], sys.argv[2]
    ctx = zmq.Context()
    try:
        if mode in ("sub", "sub-bind"):
            topic, count = sys.argv[3], int(sys.argv[4])
            sock = ctx.socket(zmq.SUB)
            sock.setsockopt(zmq.RCVTIMEO, 20000)
            sock.setsockopt_string(zmq.SUBSCRIBE, topic)
            if mode == "sub":
                sock.connect(endpoint)
            else:
                sock.bind(endpoint)
            emit({"ready": True, "endpoint": sock.getsockopt_string(zmq.LAST_ENDPOINT)})
            for _ in range(count):
                frames = sock.recv_multipart()
                assert len(frames) == 3, f"{len(frames)} frames, expected [topic, seq, payload]"
                emit(decode(*frames))
        elif mode == "collect":
            topic, idle = sys.argv[3], float(sys.argv[4])
            sock = ctx.socket(zmq.SUB)
            sock.setsockopt_string(zmq.SUBSCRIBE, topic)
            sock.connect(endpoint)
            emit({"ready": True, "endpoint": endpoint})
            while sock.poll(int(idle * 1000)):
                frames = sock.recv_multipart()
                assert len(frames) == 3, f"{len(frames)} frames, expected [topic, seq, payload]"
                emit(decode(*frames))
        elif mode == "replay":
            start, kind = int(sys.argv[3]), sys.argv[4]
            sock = ctx.socket(zmq.DEALER if kind == "dealer" else zmq.REQ)
            sock.setsockopt(zmq.RCVTIMEO, 20000)
            sock.connect(endpoint)
            request = start.to_bytes(8, "big")
            sock.send_multipart([b"", request] if kind == "dealer" else [request])
            while True:
                frames = sock.recv_multipart()
                if kind == "dealer":
                    assert frames[0] == b"", "no empty delimiter"
                    frames = frames[1:]
                assert len(frames) == 3, f"{len(frames)} frames, expected [topic, seq, payload]"
                if frames[1] == END_SEQ:
                    assert frames[0] == b"" and frames[2] == b"", "bad end marker"
                    emit({"end": True})
                    break
                emit(decode(*frames))
                if kind == "req":
                    break  # libzmq's REQ takes one reply per request
        else:
            raise SystemExit(f"unknown mode {mode}")
    except (AssertionError, zmq.ZMQError, ValueError) as e:
        emit({"error": f"{type(e).__name__}: {e}"})
        sys.exit(1)
    finally:
        ctx.destroy(linger=0)


if __name__ == "__main__":
    main()
