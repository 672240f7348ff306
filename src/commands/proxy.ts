/**
 * `fennec proxy --prefill URL... --decode URL...`: vLLM's disaggregated-serving proxy (disagg_proxy_demo.py's flags)
 * in the binary; the request handling is server/pd-proxy.ts. Logs one line when ready, one per request and an access
 * line per answer (uvicorn's shape, as serve); stops on SIGINT/SIGTERM. Returns -1 so the CLI keeps the process alive.
 */
import { proxyConfig } from "../command-line/proxy-config.ts";
import type { Options } from "../command-line/flags.ts";
import { accessLine } from "../server/access-log.ts";
import { listenHttp, type PeerAddress } from "../server/http-listener.ts";
import { createPdProxy } from "../server/pd-proxy.ts";
import { tracingFlags } from "../command-line/tracing-flags.ts";
import { startTracing } from "../tracing/tracer.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { errorMessage } from "../util/error-message.ts";
import { createLogger } from "../util/logger.ts";

/** A connection silent for this long is closed (a non-streamed decode answer can be quiet for a while). */
const IDLE_TIMEOUT_S = 255;
/** how long a stopping proxy waits for its last spans to reach the receiver */
const TRACE_FLUSH_MS = 3000;

export async function main(options: Options): Promise<number> {
  const config = proxyConfig(options);
  if (!config.ok) throw new CliError(config.error);
  const { prefill, decode, host, port, upstreamTimeoutS, log } = config.value;
  const tracingConfig = tracingFlags(options);
  if (!tracingConfig.ok) throw new CliError(tracingConfig.error);
  const tracing = tracingConfig.value === null ? null : startTracing(tracingConfig.value, "fennec.proxy", "fennec-proxy");
  // as serve's loggers: fennec's lines at VLLM_LOGGING_LEVEL, the access lines at --uvicorn-log-level
  const root = createLogger({ level: log.level, format: log.format, write: (line) => void process.stderr.write(line) });
  const mainLog = root.child("proxy.ts");
  const accessLog = log.accessLog ? root.child("access", log.accessLevel) : null;
  const proxy = createPdProxy({ prefill, decode, upstreamTimeoutMs: upstreamTimeoutS * 1000, log: (level, line) => mainLog.log(level, line), tracing });
  const handle = async (request: Request, peer: PeerAddress | null): Promise<Response> => {
    const response = await proxy.handle(request);
    const url = new URL(request.url);
    accessLog?.info(accessLine({ client: peer ? `${peer.address}:${peer.port}` : null, method: request.method, target: `${url.pathname}${url.search}`, status: response.status }));
    return response;
  };
  let http: Awaited<ReturnType<typeof listenHttp>>;
  try {
    http = await listenHttp(handle, { hostname: host, port, idleTimeoutS: IDLE_TIMEOUT_S, log: (line) => mainLog.error(line) });
  } catch (e) {
    throw new RuntimeFailure(`cannot listen on ${host}:${port}: ${errorMessage(e)}`);
  }
  mainLog.info(`fennec proxy on http://${host}:${http.port}: prefill ${prefill.join(", ")}; decode ${decode.join(", ")}${tracing !== null ? `; traces to ${tracing.config.tracesUrl}` : ""}`);
  const stop = async (signal: string): Promise<void> => {
    mainLog.info(`${signal} received, shutting down`);
    http.stopAccepting();
    http.closeAll();
    // the spans still queued go out first (at most TRACE_FLUSH_MS)
    if (tracing !== null) await Promise.race([tracing.shutdown(), new Promise((resolve) => setTimeout(resolve, TRACE_FLUSH_MS))]);
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  return -1;
}
