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
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { errorMessage } from "../util/error-message.ts";
import { createLogger } from "../util/logger.ts";

/** A connection silent for this long is closed (a non-streamed decode answer can be quiet for a while). */
const IDLE_TIMEOUT_S = 255;

export async function main(options: Options): Promise<number> {
  const config = proxyConfig(options);
  if (!config.ok) throw new CliError(config.error);
  const { prefill, decode, host, port, upstreamTimeoutS, log } = config.value;
  // as serve's loggers: fennec's lines at VLLM_LOGGING_LEVEL, the access lines at --uvicorn-log-level
  const root = createLogger({ level: log.level, format: log.format, write: (line) => void process.stderr.write(line) });
  const mainLog = root.child("proxy.ts");
  const accessLog = log.accessLog ? root.child("access", log.accessLevel) : null;
  const proxy = createPdProxy({ prefill, decode, upstreamTimeoutMs: upstreamTimeoutS * 1000, log: (level, line) => mainLog.log(level, line) });
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
  mainLog.info(`fennec proxy on http://${host}:${http.port}: prefill ${prefill.join(", ")}; decode ${decode.join(", ")}`);
  const stop = (signal: string): void => {
    mainLog.info(`${signal} received, shutting down`);
    http.stopAccepting();
    http.closeAll();
    process.exit(0);
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  return -1;
}
