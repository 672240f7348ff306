/**
 * The HTTP server's settings, one record: built from serve's flags (command-line/serve-config.ts) and read by the
 * server as they are (server/server-options.ts extends it), the listener's part (host, port, uds, tls, shutdown) by serve.
 */
import type { StructuredOutputsSettings } from "./structured-outputs-config.ts";

/** What the HTTP server of `serve` is told (host, port, auth, per-response features). */
export interface ServerSettings {
  readonly host: string;
  readonly port: number;
  /** null: the model file's name */
  readonly servedModelName: string | null;
  /** the first --api-key, else $VLLM_API_KEY; null = no auth */
  readonly apiKey: string | null;
  /** every --api-key (vLLM takes several); [] = no auth */
  readonly apiKeys: readonly string[];
  /** --served-model-name after the first: other names requests may use */
  readonly servedModelAliases: readonly string[];
  /** --uds: a Unix socket instead of host:port */
  readonly uds: string | null;
  /** --root-path, without a trailing slash; null = none */
  readonly rootPath: string | null;
  readonly cors: CorsSettings;
  /** --ssl-*: null = plain HTTP */
  readonly tls: TlsSettings | null;
  readonly disableDocs: boolean;
  /** --enable-tokenizer-info-endpoint: serve GET /tokenizer_info (off by default, as in vLLM); absent: off */
  readonly enableTokenizerInfoEndpoint?: boolean;
  /** --generation-config / --override-generation-config: defaults of omitted sampling fields (vLLM's keys) */
  readonly generationDefaults: Readonly<Record<string, number>>;
  /** --max-logprobs */
  readonly maxLogprobs: number;
  readonly enablePerRequestMetrics: boolean;
  readonly forceIncludeUsage: boolean;
  readonly enablePromptTokensDetails: boolean;
  readonly enableServerLoadTracking: boolean;
  readonly enableRequestIdHeaders: boolean;
  /** --disable-web-ui: no chat / metrics page at `/` */
  readonly disableWebUi: boolean;
  /** --shutdown-timeout: seconds in-flight requests get to finish on SIGTERM/SIGINT; 0 aborts them at once */
  readonly shutdownTimeoutS: number;
  /** --structured-outputs-config */
  readonly structuredOutputs: StructuredOutputsSettings;
  /** --return-tokens-as-token-ids */
  readonly returnTokensAsTokenIds: boolean;
}

/** --allowed-origins / --allowed-methods / --allowed-headers / --allow-credentials (server/cors.ts applies them). */
export interface CorsSettings {
  readonly allowedOrigins: readonly string[];
  readonly allowedMethods: readonly string[];
  readonly allowedHeaders: readonly string[];
  readonly allowCredentials: boolean;
}

/** --ssl-keyfile / --ssl-certfile / --ssl-ca-certs / --ssl-cert-reqs, the files' paths. */
export interface TlsSettings {
  readonly keyFile: string;
  readonly certFile: string;
  readonly caFile: string | null;
  /** Python's ssl.CERT_NONE 0, CERT_OPTIONAL 1, CERT_REQUIRED 2 */
  readonly certReqs: 0 | 1 | 2;
}
