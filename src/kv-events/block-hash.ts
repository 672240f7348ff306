/**
 * vLLM's prefix-cache block hashes, byte for byte, so an external KV-aware router (llm-d-kv-cache) that rebuilds them
 * from token ids finds the same keys fennec publishes in its KV events.
 *
 * - `--prefix-caching-hash-algo` (vllm/config/cache.py `prefix_caching_hash_algo`, vllm/utils/hashing.py
 *   `get_hash_fn_by_name`): `sha256` = SHA-256 of `pickle.dumps(obj, protocol=HIGHEST_PROTOCOL)`, `sha256_cbor` =
 *   SHA-256 of `cbor2.dumps(obj, canonical=True)`.
 * - The chain (vllm/v1/core/kv_cache_utils.py `hash_block_tokens`): hash_i = H((parent, tuple(block tokens),
 *   extra_keys)) with parent = hash_{i-1}, or NONE_HASH for the first block. Only full blocks are hashed
 *   (`get_request_block_hasher`).
 * - The seed (`init_none_hash`): NONE_HASH = H(<PYTHONHASHSEED as a str>) when that variable is set, else 32 random
 *   bytes, so hashes are reproducible across restarts (and across vLLM and fennec) only with a seed.
 * - In events (`maybe_convert_block_hash`): the low 64 bits of the digest read big-endian, an unsigned int
 *   (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, the default), or the 32 raw bytes.
 *
 * vLLM's `xxhash` / `xxhash_cbor` (xxHash-128 from an optional package) are not implemented: asking for them is an
 * error, never a silent sha256.
 */
import { createHash, randomBytes } from "node:crypto";
import { encode as cborEncode } from "cborg";
import { err, ok, type Result } from "../util/result.ts";
import { pickleDumps, type PyValue } from "./python-pickle.ts";

/** A block-hash key value: None, int, str, bytes, or a tuple (a JS array) of those. */
export type HashKey = PyValue;

/** A block's 32-byte digest (vLLM BlockHash). */
export type BlockHashBytes = Uint8Array;

export type PrefixCachingHashAlgo = "sha256" | "sha256_cbor";

/** Each algorithm: how the key object becomes the bytes that SHA-256 reads. */
const SERIALIZERS: Readonly<Record<PrefixCachingHashAlgo, (value: HashKey) => Uint8Array>> = {
  // pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
  sha256: pickleDumps,
  // cbor2.dumps(obj, canonical=True): tuples are arrays, ints take their shortest head, bytes are a byte string
  sha256_cbor: (value) => cborEncode(value),
};

/** vLLM's choices for --prefix-caching-hash-algo, in its order; fennec implements the first two. */
export const PREFIX_CACHING_HASH_ALGOS = ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"] as const;
export const DEFAULT_PREFIX_CACHING_HASH_ALGO: PrefixCachingHashAlgo = "sha256";

/**
 * The flag's value, checked.
 * @example parsePrefixCachingHashAlgo("sha256_cbor") // ok("sha256_cbor")
 */
export function parsePrefixCachingHashAlgo(value: string): Result<PrefixCachingHashAlgo> {
  if (value === "sha256" || value === "sha256_cbor") return ok(value);
  if (value === "xxhash" || value === "xxhash_cbor") {
    return err(`--prefix-caching-hash-algo ${value} is not available in fennec (vLLM takes it from the optional xxhash package); use sha256 or sha256_cbor`);
  }
  return err(`--prefix-caching-hash-algo: invalid choice: '${value}' (choose from ${PREFIX_CACHING_HASH_ALGOS.map((a) => `'${a}'`).join(", ")})`);
}

/**
 * `hash_fn(obj)`: SHA-256 of the algorithm's serialization.
 * @example hashObject("sha256_cbor", "0") // sha256(cbor2.dumps("0"))
 */
export function hashObject(algo: PrefixCachingHashAlgo, value: HashKey): BlockHashBytes {
  return new Uint8Array(createHash("sha256").update(SERIALIZERS[algo](value)).digest());
}

/**
 * NONE_HASH, the parent of every first block (`init_none_hash`): the hash of the seed string, or 32 random bytes when
 * there is no seed (then no two starts agree). `seed` is what vLLM reads from PYTHONHASHSEED.
 * @example noneHash("sha256", "0")
 */
export function noneHash(algo: PrefixCachingHashAlgo, seed: string | null): BlockHashBytes {
  return seed === null ? new Uint8Array(randomBytes(32)) : hashObject(algo, seed);
}

/** The warning vLLM logs when a CBOR algorithm runs without a seed (`init_none_hash`). */
export function unseededWarning(algo: PrefixCachingHashAlgo, seed: string | null): string | null {
  if (seed !== null || algo !== "sha256_cbor") return null;
  return "PYTHONHASHSEED is not set. This will lead to non-reproducible block-hashes when using CBOR-based hash functions such as sha256_cbor or xxhash_cbor. Consider setting PYTHONHASHSEED to a fixed value for reproducibility.";
}

/** Hashes blocks as one vLLM engine does: one algorithm, one NONE_HASH. */
export class BlockHasher {
  constructor(
    readonly algo: PrefixCachingHashAlgo,
    readonly noneHash: BlockHashBytes,
  ) {
    if (noneHash.length !== 32) throw new Error(`block hasher: NONE_HASH must be 32 bytes (got ${noneHash.length})`);
  }

  /**
   * `hash_block_tokens`: the hash of one full block, chained on its parent's (null: the first block).
   * @example hasher.hashBlockTokens(null, [1, 2, 3, 4], null)
   */
  hashBlockTokens(parent: BlockHashBytes | null, tokenIds: readonly number[], extraKeys: readonly HashKey[] | null): BlockHashBytes {
    // vLLM: `if not parent_block_hash` also maps an empty parent to NONE_HASH
    const chained = parent === null || parent.length === 0 ? this.noneHash : parent;
    return hashObject(this.algo, [chained, tokenIds, extraKeys]);
  }

  /**
   * `request_block_hasher`: the hashes of the full blocks of `tokenIds` after the `known` ones, each chained on the one
   * before; `extraKeysOf(i)` gives block i's extra keys (LoRA name, cache salt on block 0, ...), null for none.
   */
  hashFullBlocks(
    tokenIds: readonly number[],
    blockSize: number,
    known: readonly BlockHashBytes[],
    extraKeysOf: (blockIndex: number) => readonly HashKey[] | null = () => null,
  ): BlockHashBytes[] {
    const out: BlockHashBytes[] = [];
    let parent = known.length > 0 ? known[known.length - 1]! : null;
    for (let i = known.length; (i + 1) * blockSize <= tokenIds.length; i++) {
      const hash = this.hashBlockTokens(parent, tokenIds.slice(i * blockSize, (i + 1) * blockSize), extraKeysOf(i));
      out.push(hash);
      parent = hash;
    }
    return out;
  }
}

/** A multimodal item's placeholder tokens in the prompt (vLLM PlaceholderRange) and its content identifier. */
export interface MultimodalPlaceholder {
  readonly identifier: string;
  readonly offset: number;
  readonly length: number;
}

/**
 * `generate_block_hash_extra_keys` for block [blockStart, blockStart + blockSize): in vLLM's order the LoRA name,
 * `(identifier, offset - blockStart)` for each multimodal item overlapping the block (`_gen_mm_extra_hash_keys`, items
 * sorted by offset), the cache salt (first block only), and the SHA-256 of the block's prompt embeddings; null for none.
 * @example blockExtraKeys({ blockStart: 0, blockSize: 16, cacheSalt: "s" }) // ["s"]
 */
export function blockExtraKeys(opts: {
  readonly blockStart: number;
  readonly blockSize: number;
  readonly loraName?: string | null;
  readonly multimodal?: readonly MultimodalPlaceholder[];
  readonly cacheSalt?: string | null;
  readonly promptEmbedsDigest?: Uint8Array | null;
}): HashKey[] | null {
  const keys: HashKey[] = [];
  if (opts.loraName) keys.push(opts.loraName);
  const end = opts.blockStart + opts.blockSize;
  for (const item of opts.multimodal ?? []) {
    if (end > item.offset && opts.blockStart < item.offset + item.length) keys.push([item.identifier, item.offset - opts.blockStart]);
  }
  if (opts.blockStart === 0 && opts.cacheSalt) keys.push(opts.cacheSalt);
  if (opts.promptEmbedsDigest) keys.push(opts.promptEmbedsDigest);
  return keys.length > 0 ? keys : null;
}

/** How events carry a hash: an unsigned 64-bit int (vLLM's default) or the 32 raw bytes. */
export type ExternalBlockHash = bigint | Uint8Array;

/**
 * `maybe_convert_block_hash`: the last 8 bytes of the digest read big-endian (`intHashes`, the default of
 * VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES), else the digest itself.
 * @example externalBlockHash(digest, true) // 15760518052499183552n
 */
export function externalBlockHash(hash: BlockHashBytes, intHashes: boolean): ExternalBlockHash {
  if (!intHashes) return hash;
  return new DataView(hash.buffer, hash.byteOffset, hash.byteLength).getBigUint64(hash.byteLength - 8, false);
}
