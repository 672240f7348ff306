#!/usr/bin/env python3
"""Writes test/kv-events/fixtures.json: the oracle values fennec's KV-event code must reproduce byte for byte.

- block hashes: computed the way vLLM computes them (vllm/utils/hashing.py sha256 / sha256_cbor,
  vllm/v1/core/kv_cache_utils.py init_none_hash / hash_block_tokens / maybe_convert_block_hash), with Python's own
  pickle, hashlib and cbor2;
- event batches: encoded by msgspec from structs declared as vllm/distributed/kv_events.py declares them (the wire
  contract: field names, order, defaults, tag=True maps, array_like batch, omit_defaults).

Run: python3 -m venv /tmp/v && /tmp/v/bin/pip install msgspec cbor2 && /tmp/v/bin/python test/kv-events/make-fixtures.py
"""
import hashlib
import json
import os
import pickle
from typing import Any

import cbor2
import msgspec


def sha256(obj: Any) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def sha256_cbor(obj: Any) -> bytes:
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


HASH_FNS = {"sha256": sha256, "sha256_cbor": sha256_cbor}


def to_json(value: Any) -> Any:
    """Python key values as JSON: bytes -> {"bytes": hex}, tuples -> lists."""
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    return value


def chain(hash_fn, none_hash: bytes, blocks):
    out = []
    parent = None
    for tokens, extra in blocks:
        h = hash_fn((parent if parent else none_hash, tuple(tokens), extra))
        out.append({
            # a long run of consecutive ids is written as its [start, stop) range
            "tokens": {"range": [tokens[0], tokens[-1] + 1]} if len(tokens) > 64 else tokens,
            "extra_keys": to_json(extra),
            "hash": h.hex(),
            "external": str(int.from_bytes(h, "big") & ((1 << 64) - 1)),
        })
        parent = h
    return out


CASES = {
    "plain": [(list(range(1, 17)), None), (list(range(17, 33)), None), ([0] * 16, None)],
    "large ids": [([255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**40, 151643], None)],
    "extra keys": [
        ([5, 6, 7, 8], ("my-lora", ("image-digest", -3), "salt-1", hashlib.sha256(b"embeds").digest())),
        ([9, 10, 11, 12], ("my-lora",)),
    ],
    # 30000 ids over 65535 take 5 bytes each in pickle: several 64 KiB frames
    "framed": [(list(range(70000, 100000)), None)],
    "empty block": [([], None)],
}

hashes = []
for algo, fn in HASH_FNS.items():
    for seed in ["0", "12345"]:
        none_hash = fn(seed)
        for name, blocks in CASES.items():
            hashes.append({"algo": algo, "seed": seed, "none_hash": none_hash.hex(), "case": name, "blocks": chain(fn, none_hash, blocks)})


# --- events, as vllm/distributed/kv_events.py declares them ---------------------------------------------------------
class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(KVCacheEvent):
    block_hashes: list[bytes | int]
    parent_block_hash: bytes | int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[bytes | int]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


H = [2**64 - 1, 15760518052499183552, 7, 2**32, 2**53 + 1]
BATCHES = {
    "stored as the primary pool emits it": KVEventBatch(ts=1789095808.83, events=[BlockStored(
        block_hashes=[H[1], H[0]], parent_block_hash=None, token_ids=list(range(32)), block_size=16, lora_id=None,
        medium="GPU", lora_name=None, extra_keys=[None, None], group_idx=0, kv_cache_spec_kind="full_attention")],
        data_parallel_rank=0),
    "stored with lora, parent, offload tier, locality": KVEventBatch(ts=1.5, events=[BlockStored(
        block_hashes=[H[2], H[3], H[4]], parent_block_hash=H[1], token_ids=[1, 200, 70000], block_size=1, lora_id=3,
        medium="CPU", lora_name="sql-lora", extra_keys=[("sql-lora",), ("sql-lora", ("img", -2)), None], group_idx=1,
        kv_cache_spec_kind="sliding_window", kv_cache_spec_sliding_window=4096, locality="LOCAL")],
        data_parallel_rank=2),
    "removed and cleared": KVEventBatch(ts=1700000000.0, events=[
        BlockRemoved(block_hashes=[H[0]], medium="GPU", group_idx=0),
        BlockRemoved(block_hashes=[H[2], H[3]], medium="STORAGE"),
        AllBlocksCleared()], data_parallel_rank=0),
    "byte hashes": KVEventBatch(ts=0.25, events=[BlockStored(
        block_hashes=[bytes(range(32))], parent_block_hash=bytes(32), token_ids=[], block_size=0, lora_id=None,
        medium=None, lora_name=None, group_idx=0)], data_parallel_rank=0),
    "no rank": KVEventBatch(ts=2.0, events=[AllBlocksCleared()]),
}

encoder = msgspec.msgpack.Encoder()
batches = {name: encoder.encode(b).hex() for name, b in BATCHES.items()}

out = {"hashes": hashes, "batches": batches}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"wrote {path}: {len(hashes)} hash chains, {len(batches)} batches")
