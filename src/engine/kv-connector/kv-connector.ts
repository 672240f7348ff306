/**
 * The KV connector interface (vLLM KVConnectorBase_V1, vllm/distributed/kv_transfer/kv_connector/v1/base.py, reduced):
 * what the scheduler and the engine core ask of a connector that brings KV blocks in from elsewhere (the offload
 * tier, offload-connector.ts; another instance, peer-connector.ts) and sends them out. The scheduler side decides
 * which waiting requests load instead of computing; the engine side moves the bytes between steps.
 */
import type { ComputedBlocks } from "../kv-cache-manager.ts";
import type { RequestState } from "../request.ts";

/**
 * One engine's KV connector: the scheduler's calls first (vLLM's scheduler-side methods), then the engine core's.
 * @example const scheduler = new Scheduler(config, kv, nowMs, offloadConnector ?? peerConnector);
 */
export interface KvConnector {
  // ---- scheduler side ----

  /** requests whose load finished (or failed: then they recompute), for the head of the waiting queue */
  takeLoaded(): RequestState[];
  /** true when the request's next blocks are in the tier: its load started and it left the waiting queue (vLLM get_num_new_matched_tokens + update_state_after_alloc) */
  startLoad(request: RequestState, computed: ComputedBlocks): boolean;
  /** a request is admitted with only its local hit: vLLM's external prefix-cache query */
  recordAdmission(request: RequestState, computed: ComputedBlocks): void;
  /** before a request's primary blocks are freed; `gone`: aborted (its queued stores are dropped) (vLLM request_finished) */
  beforeFree(request: RequestState, gone: boolean): void;
  readonly numLoading: number;
  /** true when the request may not compute its prompt itself now (its KV is to be read from elsewhere) */
  mustWait?(request: RequestState): boolean;

  // ---- engine side ----

  /** once per step, before scheduling: settle the transfers that finished (vLLM get_finished) */
  drain(runningAndWaiting: Iterable<RequestState>): void;
  /** after a step's update: queue the stores of the step's new full blocks (vLLM build_connector_meta's saves) */
  afterStep(requests: Iterable<RequestState>): void;
  /** a load is in flight or settled but not yet taken */
  hasPendingLoads(): boolean;
  /** resolves when a transfer settles (or a bounded wait ends): the engine schedules again */
  waitForProgress(): Promise<void>;
  /** start-up lines that say what the connector is */
  describe(): string[];
  /** releases the connector's storage and sockets; it takes no work afterwards */
  close(): void;
}
