/**
 * Prefill/decode on two real fennec processes for black-box tests: their --kv-transfer-config, and the two HTTP legs
 * a disaggregated proxy makes (vLLM tests/v1/kv_connector/nixl_integration/toy_proxy_server.py), done by the test
 * itself: the prefill leg with `do_remote_decode`, stream off, max_tokens 1; the decode leg with the original body
 * and the prefill answer's kv_transfer_params.
 */
import { openDefaultModel } from "../../src/gguf/default-model.ts";
import { readModelConfig } from "../../src/model/read-model-config.ts";
import { parseExposition, sampleValue } from "../metrics/exposition.ts";

export type Json = Record<string, any>;

export const BLOCK_SIZE = 16;

/** `--kv-transfer-config` for one side: fennec's NixlConnector on loopback, any free side-channel port. */
export function peerArgs(role: "kv_producer" | "kv_consumer" | "kv_both", extra: Json = {}, leaseSeconds = 30): string[] {
  return [
    "--block-size", String(BLOCK_SIZE),
    "--kv-transfer-config", JSON.stringify({ kv_connector: "NixlConnector", kv_role: role, kv_ip: "127.0.0.1", kv_port: 0, ...extra, kv_connector_extra_config: { kv_lease_duration: leaseSeconds } }),
  ];
}

/** bytes of one KV block of the embedded model: layers x (K, V) x block size x kv heads x head dim x f16 */
export function blockBytes(): number {
  const config = readModelConfig(openDefaultModel());
  if (!config.ok) throw new Error(config.error);
  const c = config.value;
  return c.numLayers * 2 * BLOCK_SIZE * c.numKvHeads * c.headDim * 2;
}

export const PATHS = { chat: "/v1/chat/completions", completions: "/v1/completions" } as const;
export type Endpoint = keyof typeof PATHS;

export function post(url: string, endpoint: Endpoint, body: Json, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}${PATHS[endpoint]}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
}

/** The prefill leg's body, as vLLM's proxies build it. */
export function prefillBody(body: Json): Json {
  const p: Json = {
    ...body, stream: false, max_tokens: 1,
    kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null },
  };
  if ("max_completion_tokens" in p) p.max_completion_tokens = 1;
  delete p.stream_options;
  delete p.min_tokens;
  return p;
}

export interface ProxiedAnswer {
  /** the prefill answer's kv_transfer_params */
  readonly params: Json;
  /** the prompt's tokens, from the prefill answer */
  readonly numPromptTokens: number;
  readonly decode: Response;
}

/** Both legs; the decode answer is returned as it is (status, body, stream). */
export async function proxied(prefillUrl: string, decodeUrl: string, endpoint: Endpoint, body: Json, signal?: AbortSignal): Promise<ProxiedAnswer> {
  const p = await post(prefillUrl, endpoint, prefillBody(body), signal);
  const answer = await p.json() as Json;
  if (p.status !== 200) throw new Error(`prefill leg answered ${p.status}: ${JSON.stringify(answer)}`);
  const params = answer.kv_transfer_params as Json;
  const decode = await post(decodeUrl, endpoint, { ...body, kv_transfer_params: params }, signal);
  return { params, numPromptTokens: answer.usage.prompt_tokens, decode };
}

/** The text of an answer: the JSON body's choice 0, or the streamed deltas joined. */
export async function answerText(endpoint: Endpoint, response: Response): Promise<string> {
  const text = await response.text();
  if (response.status !== 200) throw new Error(`answer ${response.status}: ${text}`);
  if (!text.startsWith("data:")) {
    const json = JSON.parse(text) as Json;
    return endpoint === "chat" ? json.choices[0].message.content : json.choices[0].text;
  }
  let out = "";
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const choice = (JSON.parse(line.slice(6)) as Json).choices?.[0];
    out += (endpoint === "chat" ? choice?.delta?.content : choice?.text) ?? "";
  }
  return out;
}

export async function metric(url: string, name: string, filter: Readonly<Record<string, string>> = {}): Promise<number> {
  const samples = parseExposition(await (await fetch(`${url}/metrics`)).text());
  return sampleValue(samples, name, filter);
}

/** Polls until `check` holds (a gauge that settles after the last step), at most `ms`. */
export async function eventually(check: () => Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await Bun.sleep(50);
  }
  return check();
}
