/**
 * vLLM's block hashes, byte for byte: the expected digests in fixtures.json come from Python's own pickle, hashlib and
 * cbor2 (make-fixtures.py, run the way vLLM's sha256 / sha256_cbor / init_none_hash / hash_block_tokens run).
 */
import { describe, expect, test } from "bun:test";
import {
  blockExtraKeys,
  BlockHasher,
  externalBlockHash,
  hashObject,
  type HashKey,
  noneHash,
  parsePrefixCachingHashAlgo,
  type PrefixCachingHashAlgo,
  unseededWarning,
} from "../../src/kv-events/block-hash.ts";
import { pickleDumps } from "../../src/kv-events/python-pickle.ts";
import fixtures from "./fixtures.json";

type JsonKey = null | number | string | { bytes: string } | JsonKey[];
interface Block {
  tokens: number[] | { range: [number, number] };
  extra_keys: JsonKey[] | null;
  hash: string;
  external: string;
}
interface Chain {
  algo: PrefixCachingHashAlgo;
  seed: string;
  none_hash: string;
  case: string;
  blocks: Block[];
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
const fromJson = (v: JsonKey): HashKey => {
  if (Array.isArray(v)) return v.map(fromJson);
  if (v !== null && typeof v === "object") return new Uint8Array(Buffer.from(v.bytes, "hex"));
  return v;
};
const tokensOf = (t: Block["tokens"]): number[] => {
  if (Array.isArray(t)) return t;
  const out: number[] = [];
  for (let i = t.range[0]; i < t.range[1]; i++) out.push(i);
  return out;
};

const chains = fixtures.hashes as Chain[];

describe("hash chains match Python", () => {
  test.each(chains.map((c) => [`${c.algo} seed=${c.seed} ${c.case}`, c] as const))("%s", (_name, chain) => {
    const seeded = noneHash(chain.algo, chain.seed);
    expect(hex(seeded)).toBe(chain.none_hash);
    const hasher = new BlockHasher(chain.algo, seeded);
    let parent: Uint8Array | null = null;
    for (const block of chain.blocks) {
      const extra = block.extra_keys === null ? null : block.extra_keys.map(fromJson);
      const h = hasher.hashBlockTokens(parent, tokensOf(block.tokens), extra);
      expect(hex(h)).toBe(block.hash);
      expect(externalBlockHash(h, true)).toBe(BigInt(block.external));
      parent = h;
    }
  });

  test("the fixture covers both algorithms, two seeds, extra keys and multi-frame pickles", () => {
    expect(new Set(chains.map((c) => c.algo))).toEqual(new Set(["sha256", "sha256_cbor"]));
    expect(new Set(chains.map((c) => c.seed)).size).toBe(2);
    expect(chains.some((c) => c.case === "framed")).toBe(true);
    // 30000 five-byte ints are over 64 KiB: the pickle has more than one FRAME opcode
    const big = pickleDumps([new Uint8Array(32), Array.from({ length: 30000 }, (_, i) => 70000 + i), null]);
    let frames = 0;
    for (let at = 2; at < big.length && big[at] === 0x95; ) {
      frames++;
      at += 9 + Number(new DataView(big.buffer, at + 1, 8).getBigUint64(0, true));
    }
    expect(frames).toBeGreaterThan(1);
  });
});

describe("chaining", () => {
  const hasher = new BlockHasher("sha256_cbor", noneHash("sha256_cbor", "0"));
  const tokens = Array.from({ length: 50 }, (_, i) => i * 7);

  test("hashFullBlocks hashes only full blocks, each chained on the one before", () => {
    const hashes = hasher.hashFullBlocks(tokens, 16, []);
    expect(hashes.length).toBe(3);
    expect(hex(hashes[0]!)).toBe(hex(hasher.hashBlockTokens(null, tokens.slice(0, 16), null)));
    expect(hex(hashes[2]!)).toBe(hex(hasher.hashBlockTokens(hashes[1]!, tokens.slice(32, 48), null)));
  });

  test("continuing from known hashes gives the same chain", () => {
    const all = hasher.hashFullBlocks(tokens, 16, []);
    expect(hasher.hashFullBlocks(tokens, 16, all.slice(0, 1)).map(hex)).toEqual(all.slice(1).map(hex));
  });

  test("an empty parent is the first block (vLLM's `if not parent_block_hash`)", () => {
    expect(hex(hasher.hashBlockTokens(new Uint8Array(0), [1, 2], null))).toBe(hex(hasher.hashBlockTokens(null, [1, 2], null)));
  });

  test("extra keys and the seed change the hash", () => {
    const base = hex(hasher.hashBlockTokens(null, [1, 2], null));
    expect(hex(hasher.hashBlockTokens(null, [1, 2], ["salt"]))).not.toBe(base);
    const other = new BlockHasher("sha256_cbor", noneHash("sha256_cbor", "1"));
    expect(hex(other.hashBlockTokens(null, [1, 2], null))).not.toBe(base);
  });

  test("without a seed NONE_HASH is random per start, and sha256_cbor warns as vLLM does", () => {
    const a = noneHash("sha256", null);
    const b = noneHash("sha256", null);
    expect(a.length).toBe(32);
    expect(hex(a)).not.toBe(hex(b));
    expect(unseededWarning("sha256_cbor", null)).toContain("PYTHONHASHSEED is not set");
    expect(unseededWarning("sha256", null)).toBeNull();
    expect(unseededWarning("sha256_cbor", "0")).toBeNull();
  });

  test("a NONE_HASH that is not 32 bytes is refused", () => {
    expect(() => new BlockHasher("sha256", new Uint8Array(8))).toThrow("32 bytes");
  });
});

describe("external hashes and extra keys", () => {
  test("the int form is the digest's last 8 bytes read big-endian; the bytes form is the digest", () => {
    const digest = hashObject("sha256", "x");
    const expected = BigInt(`0x${hex(digest.subarray(24))}`);
    expect(externalBlockHash(digest, true)).toBe(expected);
    expect(externalBlockHash(digest, false)).toBe(digest);
  });

  test("extra keys in vLLM's order: LoRA name, multimodal items, cache salt (first block), prompt-embeds digest", () => {
    const embeds = new Uint8Array(32).fill(9);
    const mm = [
      { identifier: "img-a", offset: 4, length: 20 },
      { identifier: "img-b", offset: 40, length: 4 },
    ];
    expect(blockExtraKeys({ blockStart: 0, blockSize: 16, loraName: "l", multimodal: mm, cacheSalt: "s", promptEmbedsDigest: embeds }))
      .toEqual(["l", ["img-a", 4], "s", embeds]);
    // block 16..32: img-a runs into it from offset 4 (relative offset -12); no salt after the first block
    expect(blockExtraKeys({ blockStart: 16, blockSize: 16, multimodal: mm, cacheSalt: "s" })).toEqual([["img-a", -12]]);
    expect(blockExtraKeys({ blockStart: 32, blockSize: 16, multimodal: mm })).toEqual([["img-b", 8]]);
    expect(blockExtraKeys({ blockStart: 48, blockSize: 16, multimodal: mm, cacheSalt: "s" })).toBeNull();
  });
});

describe("--prefix-caching-hash-algo", () => {
  test.each([["sha256"], ["sha256_cbor"]])("%s is accepted", (algo) => {
    expect(parsePrefixCachingHashAlgo(algo)).toEqual({ ok: true, value: algo as PrefixCachingHashAlgo });
  });

  test("xxhash variants say fennec lacks them; anything else lists vLLM's choices", () => {
    const x = parsePrefixCachingHashAlgo("xxhash_cbor");
    expect(x.ok).toBe(false);
    if (!x.ok) expect(x.error).toContain("not available in fennec");
    const bad = parsePrefixCachingHashAlgo("md5");
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error).toBe("--prefix-caching-hash-algo: invalid choice: 'md5' (choose from 'sha256', 'sha256_cbor', 'xxhash', 'xxhash_cbor')");
  });
});
