/**
 * fennec's KV connector between instances, configured as vLLM's `NixlConnector` (vllm/distributed/kv_transfer/
 * kv_connector/v1/nixl_connector.py) and speaking its per-request `kv_transfer_params`; the transport is fennec's own
 * TCP side channel (peer-transport.ts, frames of peer-wire.ts), not the NIXL library.
 *
 * Pull, as NIXL's read mode: the decode instance reads the blocks when it admits the request, into blocks it has just
 * allocated, so no instance ever holds bytes it has no block for, and the prefill side never needs to know where the
 * decode side is. Push would make the prefill side hold connections to decode instances it was never told about.
 *
 * Prefill side (kv_producer / kv_both): a request with `do_remote_decode` that finishes (stop / length) keeps its
 * prompt blocks pinned (one more reference each, vLLM request_finished -> delay_free_blocks) and answers the
 * params the decode side needs. The blocks are freed when the decode side's DONE arrives, or when the lease
 * (`kv_lease_duration`, 30 s) runs out: then vllm:nixl_num_kv_expired_reqs counts it.
 * Decode side (kv_consumer / kv_both): a request with `do_remote_prefill` gets every prompt token but the last as
 * external KV (vLLM get_num_new_matched_tokens; the last one is computed for its logits), waits in `loading` while
 * the read runs, then continues like a prefix-cache hit. A failed read fails the request (kv_load_failure_policy
 * "fail", vLLM's default: HTTP 500 with the reason) or recomputes the prompt ("recompute"). A read that lands after
 * its request was aborted is dropped, never written into blocks that are free again.
 */
import type { ComputedBlocks, KvCacheManager } from "../kv-cache-manager.ts";
import type { KvBlockTransfer } from "./block-transfer.ts";
import type { KvConnector } from "./kv-connector.ts";
import type { KvPeerConfig } from "../../config/kv-transfer-config.ts";
import type { RequestState } from "../request.ts";
import type { KvPeerStepStats, KvPeerTransfer, FinishReason } from "../stats.ts";
import { controlFrame, FRAME } from "./peer-wire.ts";
import { PeerTransport, type BlockReadJob, type RemoteBlocks } from "./peer-transport.ts";

export interface KvPeerConnectorOptions {
  readonly config: KvPeerConfig;
  readonly kv: KvCacheManager;
  readonly transfer: KvBlockTransfer;
  /** contiguous regions per block (layers x K/V): NIXL's descriptors */
  readonly descriptorsPerBlock: number;
  readonly engineIndex: number;
  readonly nowMs: () => number;
  /** something settled outside a step (a read arrived, a lease ran out): the engine loop should look again */
  readonly onWake: () => void;
  /** a read still running after this long fails (default: the lease: the prefill side has freed the blocks by then) */
  readonly loadTimeoutMs?: number;
}

/** What a decode request was told by the prefill instance's answer. */
interface RemotePrefill extends RemoteBlocks {
  readonly blockIds: readonly number[];
}

interface PinnedRequest {
  readonly blockIds: readonly number[];
  timer: ReturnType<typeof setTimeout>;
  reads: number;
}

interface LoadJob extends BlockReadJob {
  readonly request: RequestState;
  readonly remote: RemotePrefill;
  readonly localBlockIds: readonly number[];
  readonly numTokens: number;
  readonly startMs: number;
}

export interface KvPeerRequestError {
  readonly code: string;
  readonly message: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** vLLM sends remote_block_ids per KV group ([[...]]); older versions a flat list: both are read. */
function blockIdsOf(v: unknown): number[] | null {
  const flat = Array.isArray(v) && v.length === 1 && Array.isArray(v[0]) ? v[0] : v;
  if (!Array.isArray(flat) || !flat.every((id) => Number.isInteger(id) && id >= 0)) return null;
  return flat as number[];
}

export class KvPeerConnector implements KvConnector {
  private readonly config: KvPeerConfig;
  private readonly kv: KvCacheManager;
  private readonly transfer: KvBlockTransfer;
  private readonly nowMs: () => number;
  private readonly onWake: () => void;
  private readonly loadTimeoutMs: number;
  private readonly blockSize: number;
  private readonly transport: PeerTransport;
  /** the side channel's port once listening (kv_port 0: the one the system gave) */
  private boundPort: number;
  // prefill side
  private readonly remoteDecode = new Set<RequestState>();
  private readonly pinned = new Map<string, PinnedRequest>();
  /** pinned requests to free at the next drain: read (DONE) or expired */
  private readonly toRelease: { requestId: string; expired: boolean }[] = [];
  // decode side
  private readonly remotePrefill = new Map<RequestState, RemotePrefill>();
  private readonly loads: LoadJob[] = [];
  private readonly loading = new Set<RequestState>();
  private loaded: RequestState[] = [];
  private failed: { request: RequestState; message: string }[] = [];
  /** requests whose read failed and recompute: never read again */
  private readonly recomputing = new Set<RequestState>();
  private progress: (() => void) | null = null;
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  // per-step counts
  private transfers: KvPeerTransfer[] = [];
  private failedTransfers = 0;
  private failedNotifications = 0;
  private expiredRequests = 0;
  private externalQueries = 0;
  private externalHits = 0;
  private logLines: string[] = [];
  /** pinned blocks were freed: the KV usage gauge must hear of it even from an idle engine */
  private freedSinceStats = false;
  private closed = false;

  constructor(private readonly options: KvPeerConnectorOptions) {
    this.config = options.config;
    this.kv = options.kv;
    this.transfer = options.transfer;
    this.nowMs = options.nowMs;
    this.onWake = options.onWake;
    this.loadTimeoutMs = options.loadTimeoutMs ?? options.config.leaseSeconds * 1000;
    this.blockSize = options.kv.blockSize;
    this.boundPort = options.config.port + (options.config.port === 0 ? 0 : options.engineIndex);
    this.transport = new PeerTransport({
      blockBytes: options.transfer.blockBytes, blockSize: this.blockSize, nowMs: options.nowMs,
      onSettle: () => this.wake(), onNotifyFailed: () => { this.failedNotifications++; },
      server: {
        done: (requestId) => this.readDone(requestId),
        heartbeat: (requestId) => this.extendLease(requestId),
        read: (json) => this.answerRead(json),
      },
    });
  }

  get producer(): boolean { return this.config.role !== "kv_consumer"; }
  get consumer(): boolean { return this.config.role !== "kv_producer"; }
  get numLoading(): number { return this.loading.size; }
  get port(): number { return this.boundPort; }
  /** blocks held for remote readers (a leak test checks this reaches 0) */
  get numPinnedRequests(): number { return this.pinned.size; }

  /** Prefill side: opens the side channel (vLLM's port + data-parallel index). */
  async listen(): Promise<void> {
    if (!this.producer) return;
    this.boundPort = await this.transport.listen(this.config.host, this.boundPort, "set kv_port in --kv-transfer-config or VLLM_NIXL_SIDE_CHANNEL_PORT");
  }

  describe(): string[] {
    const c = this.config;
    const side = this.producer ? `, side channel tcp://${c.host}:${this.boundPort}` : "";
    return [`NixlConnector (fennec TCP transport, pull): engine_id=${c.engineId}, kv_role=${c.role}${side}, kv_lease_duration=${c.leaseSeconds}s, kv_load_failure_policy=${c.loadFailurePolicy}`];
  }

  // ---- requests in ----------------------------------------------------------------------------------------------

  /** Reads a request's kv_transfer_params (vLLM's keys); an error is the client's (HTTP 400). */
  prepare(request: RequestState, params: Readonly<Record<string, unknown>>): KvPeerRequestError | null {
    const bad = (message: string): KvPeerRequestError => ({ code: "invalid_kv_transfer_params", message });
    const decode = params["do_remote_decode"] === true;
    const prefill = params["do_remote_prefill"] === true;
    if (decode && prefill) return bad("kv_transfer_params: do_remote_decode and do_remote_prefill cannot both be true");
    if (params["transfer_mode"] !== undefined && params["transfer_mode"] !== null && params["transfer_mode"] !== "pull") {
      return bad(`kv_transfer_params: transfer_mode ${JSON.stringify(params["transfer_mode"])} is not supported: fennec's NixlConnector pulls ("pull")`);
    }
    if (decode) {
      if (!this.producer) return bad("kv_transfer_params: do_remote_decode needs a prefill instance (kv_role kv_producer or kv_both); this one is kv_consumer");
      this.remoteDecode.add(request);
      return null;
    }
    if (!prefill) return null;
    if (!this.consumer) return bad("kv_transfer_params: do_remote_prefill needs a decode instance (kv_role kv_consumer or kv_both); this one is kv_producer");
    const engineId = params["remote_engine_id"];
    const requestId = params["remote_request_id"];
    const host = params["remote_host"];
    const port = params["remote_port"];
    const blockIds = blockIdsOf(params["remote_block_ids"]);
    if (typeof engineId !== "string" || typeof requestId !== "string" || typeof host !== "string" || !Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535 || blockIds === null) {
      return bad("kv_transfer_params with do_remote_prefill needs remote_engine_id, remote_request_id, remote_host, remote_port and remote_block_ids: send the kv_transfer_params of the prefill instance's answer");
    }
    const numTokens = params["remote_num_tokens"];
    if (numTokens !== undefined && numTokens !== null && numTokens !== request.numPromptTokens) {
      return bad(`kv_transfer_params: the prefill instance computed ${String(numTokens)} prompt tokens but this prompt has ${request.numPromptTokens}: send the same prompt to both instances`);
    }
    const needed = this.kv.blocksFor(request.numPromptTokens - 1);
    if (blockIds.length < needed) return bad(`kv_transfer_params: remote_block_ids has ${blockIds.length} blocks, the prompt's ${request.numPromptTokens - 1} tokens need ${needed} of ${this.blockSize} tokens`);
    this.remotePrefill.set(request, { engineId, requestId, host, port: port as number, blockIds });
    this.heartbeat ??= setInterval(() => this.sendHeartbeats(), Math.max(100, Math.floor(this.config.leaseSeconds * 1000 / 6)));
    return null;
  }

  /**
   * Decode side, every lease / 6 while requests wait for admission (vLLM's lease heartbeat): the prefill instances
   * keep their blocks for them, however long the queue.
   */
  private sendHeartbeats(): void {
    if (this.remotePrefill.size === 0 || this.closed) {
      if (this.heartbeat !== null) clearInterval(this.heartbeat);
      this.heartbeat = null;
      return;
    }
    const byPeer = new Map<string, { host: string; port: number; ids: string[] }>();
    for (const r of this.remotePrefill.values()) {
      const key = `${r.host}:${r.port}`;
      let peer = byPeer.get(key);
      if (peer === undefined) byPeer.set(key, (peer = { host: r.host, port: r.port, ids: [] }));
      peer.ids.push(r.requestId);
    }
    for (const peer of byPeer.values()) this.transport.notify(peer.host, peer.port, controlFrame(FRAME.heartbeat, { request_ids: peer.ids }));
  }

  /**
   * Prefill side, as the request finishes (vLLM request_finished): stop / length pin its prompt blocks and give the
   * decode side's params; anything else (abort, error) or no remote decode: null, the blocks are freed as usual.
   */
  requestFinished(request: RequestState, reason: FinishReason): Readonly<Record<string, unknown>> | null {
    if (!this.remoteDecode.delete(request)) return null;
    if ((reason !== "stop" && reason !== "length") || this.closed) return null;
    const numTokens = Math.min(request.numComputedTokens, request.numPromptTokens);
    const blockIds = request.blockIds.slice(0, this.kv.blocksFor(numTokens));
    for (const id of blockIds) this.kv.pool.touch(id);
    this.unpin(request.requestId);
    this.pinned.set(request.requestId, { blockIds, timer: this.leaseTimer(request.requestId, this.config.leaseSeconds * 1000), reads: 0 });
    return {
      do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [blockIds], remote_engine_id: this.config.engineId,
      remote_request_id: request.requestId, remote_host: this.config.host, remote_port: this.boundPort, tp_size: 1,
      remote_num_tokens: numTokens, remote_blocks_expiry_time: null, transfer_mode: "pull",
    };
  }

  private leaseTimer(requestId: string, ms: number): ReturnType<typeof setTimeout> {
    return setTimeout(() => {
      this.toRelease.push({ requestId, expired: true });
      this.onWake();
    }, ms);
  }

  /** a decode instance still waits to read this request: vLLM's heartbeat sets its expiry to now + lease x 2/3 */
  private extendLease(requestId: string): void {
    const entry = this.pinned.get(requestId);
    if (entry === undefined) return;
    clearTimeout(entry.timer);
    entry.timer = this.leaseTimer(requestId, Math.floor(this.config.leaseSeconds * 1000 * 2 / 3));
  }

  private unpin(requestId: string): PinnedRequest | null {
    const entry = this.pinned.get(requestId);
    if (entry === undefined) return null;
    clearTimeout(entry.timer);
    this.pinned.delete(requestId);
    this.kv.pool.release(entry.blockIds);
    return entry;
  }

  // ---- scheduler side (KvConnector) ---------------------------------------------------------------------------------

  takeLoaded(): RequestState[] {
    const out = this.loaded.filter((r) => r.status !== "finished");
    this.loaded = [];
    return out;
  }

  /** Decode side, at admission: every prompt token but the last beyond the local hit is read from the prefill side. */
  startLoad(request: RequestState, computed: ComputedBlocks): boolean {
    const remote = this.remotePrefill.get(request);
    if (remote === undefined || this.closed || this.recomputing.has(request) || request.blockIds.length > 0) return false;
    const numExternal = request.numPromptTokens - 1 - computed.numTokens;
    const first = computed.numTokens / this.blockSize;
    const last = this.kv.blocksFor(request.numPromptTokens - 1);
    if (numExternal <= 0 || first >= last) {
      // the local prefix cache has it all: the prefill side may free its blocks now
      this.remotePrefill.delete(request);
      this.notifyDone(remote);
      return false;
    }
    if (this.kv.allocateSlots(request, numExternal, computed) === null) return false;
    this.remotePrefill.delete(request);
    const firstLookup = !request.prefixLookupDone;
    this.kv.recordLookup(request, computed);
    if (firstLookup) {
      // without prefix caching too: the scheduler must not count this request's lookup again when it comes back
      request.prefixLookupDone = true;
      if (request.numPreemptions === 0) request.numCachedTokens = computed.numTokens + numExternal;
      this.externalQueries += request.numTokens - computed.numTokens;
      this.externalHits += numExternal;
    }
    const job: LoadJob = {
      request, remote, localBlockIds: request.blockIds.slice(first, last), numTokens: numExternal, startMs: this.nowMs(),
      socket: null, settled: false, data: null, error: null, stats: null,
    };
    this.loads.push(job);
    this.loading.add(request);
    request.status = "loading";
    this.transport.read(job, remote.blockIds.slice(first, last), this.options.descriptorsPerBlock);
    return true;
  }

  recordAdmission(request: RequestState, computed: ComputedBlocks): void {
    const queries = request.numTokens - computed.numTokens;
    // vLLM counts every admission while a connector is configured, on the prefill side too (its hits are 0 there)
    if (queries !== 0) this.externalQueries += queries;
  }

  beforeFree(request: RequestState, gone: boolean): void {
    this.loading.delete(request);
    this.recomputing.delete(request);
    // finished without a finish delta (aborted, or failed late): no blocks to pin, nothing to remember
    if (gone || request.status === "finished") this.remoteDecode.delete(request);
    const remote = this.remotePrefill.get(request);
    // finished or aborted before it was ever read: the prefill side need not wait for its lease
    if (remote !== undefined && request.status === "finished") {
      this.remotePrefill.delete(request);
      this.notifyDone(remote);
    }
  }

  // ---- engine side -------------------------------------------------------------------------------------------------

  hasPendingLoads(): boolean {
    return this.loads.some((j) => !j.settled || j.request.status === "loading");
  }

  /** work outside the queues: pinned blocks to free */
  hasPendingWork(): boolean {
    return this.toRelease.length > 0 || this.failed.length > 0;
  }

  /** counts this step took that no step will report if the engine is idle */
  hasStatsToReport(): boolean {
    return this.freedSinceStats || this.transfers.length + this.failedTransfers + this.failedNotifications + this.expiredRequests + this.logLines.length > 0;
  }

  /** a new request arrived while the engine waits for a read: let it be scheduled */
  wakeWaiter(): void {
    const p = this.progress;
    this.progress = null;
    p?.();
  }

  /** a decode request whose read could not start yet (no free blocks) keeps its place: it never computes its prompt */
  mustWait(request: RequestState): boolean {
    return this.remotePrefill.has(request);
  }

  waitForProgress(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => { this.progress = null; resolve(); }, Math.max(1, this.loadTimeoutMs));
      this.progress = () => { clearTimeout(timer); resolve(); };
    });
  }

  private wake(): void {
    const p = this.progress;
    this.progress = null;
    p?.();
    this.onWake();
  }

  /** Once per engine step, before scheduling: free read / expired pins, settle reads. */
  drain(_runningAndWaiting?: Iterable<RequestState>): void {
    for (const r of this.toRelease.splice(0)) {
      const entry = this.unpin(r.requestId);
      if (entry !== null) this.freedSinceStats = true;
      if (entry === null || !r.expired) continue;
      this.expiredRequests++;
      this.logLines.push(`Releasing expired KV blocks for request ${r.requestId} which were retrieved by ${entry.reads} remote worker(s) before lease expired.`);
    }
    const now = this.nowMs();
    for (let i = 0; i < this.loads.length; ) {
      const job = this.loads[i]!;
      if (!job.settled) {
        if (now - job.startMs > this.loadTimeoutMs) this.transport.fail(job, `no answer from the prefill instance ${job.remote.host}:${job.remote.port} within ${this.loadTimeoutMs} ms`);
        i++;
        continue;
      }
      this.loads.splice(i, 1);
      const request = job.request;
      if (request.status !== "loading") continue; // aborted meanwhile: the bytes are dropped
      if (job.data === null) {
        this.failedTransfers++;
        const message = `KV transfer from the prefill instance ${job.remote.host}:${job.remote.port} (engine ${job.remote.engineId}, request ${job.remote.requestId}) failed: ${job.error}`;
        this.logLines.push(message);
        this.loading.delete(request);
        if (this.config.loadFailurePolicy === "recompute") {
          this.kv.free(request);
          this.recomputing.add(request);
          request.status = "waiting";
          this.loaded.push(request);
        } else {
          request.status = "waiting";
          this.failed.push({ request, message: `${message}; kv_load_failure_policy is "fail" (set "kv_load_failure_policy":"recompute" in --kv-transfer-config to compute the prompt instead)` });
        }
        continue;
      }
      const writeStartMs = this.nowMs();
      this.transfer.write(job.localBlockIds, job.data);
      request.numComputedTokens += job.numTokens;
      this.kv.cacheFullBlocks(request);
      this.transfers.push({ ...job.stats!, requestId: request.requestId, writeSeconds: (this.nowMs() - writeStartMs) / 1000 });
      this.loading.delete(request);
      request.status = "waiting";
      this.loaded.push(request);
    }
  }

  afterStep(_requests?: Iterable<RequestState>): void {}

  /** decode requests whose read failed under kv_load_failure_policy "fail": the engine fails them (HTTP 500) */
  takeFailed(): { request: RequestState; message: string }[] {
    const out = this.failed.filter((f) => f.request.status !== "finished");
    this.failed = [];
    return out;
  }

  takeStats(): KvPeerStepStats {
    const stats: KvPeerStepStats = {
      transfers: this.transfers, failedTransfers: this.failedTransfers, failedNotifications: this.failedNotifications,
      expiredRequests: this.expiredRequests, externalQueries: this.externalQueries, externalHits: this.externalHits, logLines: this.logLines,
    };
    this.transfers = [];
    this.freedSinceStats = false;
    this.failedTransfers = this.failedNotifications = this.expiredRequests = this.externalQueries = this.externalHits = 0;
    this.logLines = [];
    return stats;
  }

  // ---- the side channel (peer-transport.ts moves the bytes) ---------------------------------------------------------

  /** Decode side: a request with a prefill instance's params was refused before it was queued. */
  rejected(params: Readonly<Record<string, unknown>>): void {
    const host = params["remote_host"];
    const port = params["remote_port"];
    const requestId = params["remote_request_id"];
    if (params["do_remote_prefill"] !== true || typeof host !== "string" || !Number.isInteger(port) || typeof requestId !== "string") return;
    this.transport.notify(host, port as number, controlFrame(FRAME.done, { request_id: requestId }));
  }

  /** Decode side: tells the prefill side its blocks are no longer needed (a request that never read them). */
  private notifyDone(remote: RemotePrefill): void {
    this.transport.notify(remote.host, remote.port, controlFrame(FRAME.done, { request_id: remote.requestId }));
  }

  /** Prefill side: a decode instance read the request's blocks, or never will (DONE): they are freed at the next drain. */
  private readDone(requestId: string): void {
    if (!this.pinned.has(requestId)) return;
    this.toRelease.push({ requestId, expired: false });
    this.onWake();
  }

  /** Prefill side: a READ's blocks ([numBlocks, blockBytes]) when this instance holds them for the request, or why not. */
  private answerRead(json: Record<string, unknown>): Uint8Array | { readonly refused: string } {
    const refuse = (refused: string): { refused: string } => ({ refused });
    const engineId = json["engine_id"];
    const requestId = json["request_id"];
    if (engineId !== this.config.engineId) return refuse(`this prefill instance is engine ${this.config.engineId}, not ${String(engineId)}`);
    if (json["block_bytes"] !== this.transfer.blockBytes || json["block_size"] !== this.blockSize) {
      return refuse(`compatibility mismatch: this prefill instance has blocks of ${this.blockSize} tokens, ${this.transfer.blockBytes} bytes; the reader expects ${String(json["block_size"])} tokens, ${String(json["block_bytes"])} bytes (same model, --block-size and --kv-cache-dtype on both)`);
    }
    const entry = typeof requestId === "string" ? this.pinned.get(requestId) : undefined;
    if (entry === undefined) return refuse(`no KV blocks are held for request ${String(requestId)} (never prefilled here, already read, or its ${this.config.leaseSeconds} s lease expired)`);
    const ids = json["block_ids"];
    if (!Array.isArray(ids) || !ids.every((id) => entry.blockIds.includes(id as number))) return refuse(`request ${String(requestId)} holds blocks ${JSON.stringify(entry.blockIds)}; the read asked for others`);
    entry.reads++;
    return this.transfer.read(ids as number[]); // [ids.length, blockBytes]
  }

  close(): void {
    this.closed = true;
    for (const entry of this.pinned.values()) clearTimeout(entry.timer);
    if (this.heartbeat !== null) clearInterval(this.heartbeat);
    this.transport.close();
  }
}
