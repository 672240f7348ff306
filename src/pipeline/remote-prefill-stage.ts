/**
 * Stage 0 of a chain running in another process (`stage_args[0].url`): a prefill server of vLLM's disaggregated
 * serving (fennec with `--kv-transfer-config` NixlConnector kv_producer, or vLLM with its NixlConnector). Per request it
 * sends what vLLM's proxies send to a prefill instance (toy_proxy_server.py send_request_to_service): the prompt (token
 * ids), max_tokens 1, not streamed, `kv_transfer_params: {do_remote_decode: true, ...}`; the answer's kv_transfer_params
 * name the pinned blocks, which stage 1 (a local kv_consumer engine) pulls over the connector. The one token it answers
 * is not the client's: stage 1 computes the last prompt position again and generates from there, as vLLM's decode
 * instance does. Model facts and the tokenizer are stage 1's (both ends serve the same model; the connector checks
 * the block layout when it reads).
 * @example const stage = new RemotePrefillStage("http://10.0.0.1:8100", 0); stage.bindLocal(decodeStage);
 */
import { EngineRequestError, type GenerateRequest, type Orchestrator, type RequestOutput } from "../frontend/orchestrator.ts";
import type { ModelConfig } from "../model/model-config.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import { nowMs } from "../util/clock.ts";
import { errorMessage } from "../util/error-message.ts";
import { PREFILL_KV_TRANSFER_PARAMS } from "../util/nixl-params.ts";

/** Longest wait for the prefill server's answer (one token; vLLM's demo proxy allows 20 min per read) */
const PREFILL_TIMEOUT_MS = 600_000;

interface CompletionAnswer {
  readonly choices?: readonly { readonly text?: string; readonly token_ids?: readonly number[] | null; readonly finish_reason?: string | null }[];
  readonly usage?: { readonly prompt_tokens_details?: { readonly cached_tokens?: number } | null } | null;
  readonly kv_transfer_params?: Record<string, unknown> | null;
  readonly error?: { readonly message?: string };
}

export class RemotePrefillStage implements Orchestrator {
  private local: Orchestrator | null = null;

  constructor(readonly url: string, readonly stageId: number) {}

  /** the local stage that continues from this one lends its model facts (buildPipeline calls it once all are built) */
  bindLocal(local: Orchestrator): void { this.local = local; }

  private get twin(): Orchestrator {
    if (this.local === null) throw new Error(`stage ${this.stageId} (${this.url}) is not bound to its local decode stage`);
    return this.local;
  }

  get modelConfig(): ModelConfig { return this.twin.modelConfig; }
  get maxModelLen(): number { return this.twin.maxModelLen; }
  get tokenizer(): Tokenizer { return this.twin.tokenizer; }
  /** the server's health is its own /health; a request to it that fails says why */
  isHealthy(): boolean { return true; }
  async shutdown(): Promise<void> {}

  async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<RequestOutput> {
    const where = `stage ${this.stageId} (prefill server ${this.url})`;
    const body = {
      prompt: request.promptTokenIds, max_tokens: 1, stream: false, temperature: 0, return_token_ids: true,
      kv_transfer_params: { ...PREFILL_KV_TRANSFER_PARAMS },
    };
    const timeout = AbortSignal.timeout(PREFILL_TIMEOUT_MS);
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${this.url}/v1/completions`, {
        method: "POST", headers: { "content-type": "application/json", "x-request-id": request.externalRequestId ?? request.requestId },
        body: JSON.stringify(body), signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      text = await response.text();
    } catch (e) {
      if (signal?.aborted) return;
      throw new EngineRequestError("kv_load_failed", `${where} cannot be reached: ${timeout.aborted ? `no answer within ${PREFILL_TIMEOUT_MS / 1000} s` : errorMessage(e)}`);
    }
    let answer: CompletionAnswer;
    try { answer = JSON.parse(text) as CompletionAnswer; } catch {
      throw new EngineRequestError("kv_load_failed", `${where} answered ${response.status} with a body that is not JSON`);
    }
    // its 4xx is about the request (a prompt too long for it): the client's; anything else is the server's
    if (!response.ok) {
      const message = `${where} answered ${response.status}: ${answer.error?.message ?? text.slice(0, 300)}`;
      throw new EngineRequestError(response.status < 500 ? "invalid_request" : "kv_load_failed", message);
    }
    const params = answer.kv_transfer_params;
    if (typeof params !== "object" || params === null) {
      throw new EngineRequestError("kv_load_failed", `${where} answered no kv_transfer_params: start it with --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'`);
    }
    const choice = answer.choices?.[0];
    const doneMs = nowMs();
    yield {
      requestId: request.requestId,
      outputs: [{
        index: 0, textDelta: choice?.text ?? "", tokenIdsDelta: choice?.token_ids ?? [], numGeneratedTokens: choice?.token_ids?.length ?? 0,
        finishReason: choice?.finish_reason === "stop" ? "stop" : "length", stopReason: null,
      }],
      numPromptTokens: request.promptTokenIds.length,
      numCachedTokens: answer.usage?.prompt_tokens_details?.cached_tokens ?? 0,
      finished: true,
      times: { arrivalMs: request.arrivalMs, queuedMs: null, scheduledMs: null, firstTokenMs: doneMs, lastTokenMs: doneMs },
      kvTransferParams: params,
    };
  }
}
