/**
 * `proxy`'s flags as one typed config (vLLM's disagg_proxy_demo.py --prefill / --decode), with the server log.
 */
import { err, ok, type Result } from "../util/result.ts";
import type { Options } from "./flags.ts";
import { stringOrNull } from "./flag-values.ts";
import { logConfig, type LogConfig } from "./log-config.ts";

/** `proxy`'s flags as one typed config: the prefill and decode servers as base URLs without a trailing /v1. */
export interface ProxyConfig {
  readonly prefill: readonly string[];
  readonly decode: readonly string[];
  readonly host: string;
  readonly port: number;
  readonly upstreamTimeoutS: number;
  readonly log: LogConfig;
}

/**
 * One --prefill / --decode value as a base URL: `host:port` (disagg_proxy_demo.py's form) gets http://; a trailing
 * `/v1` (the OpenAI client's base URL) or `/` is dropped, since the proxy appends the request's own /v1/... path.
 */
export function upstreamBaseUrl(flag: string, raw: string): Result<string> {
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let url: URL;
  try { url = new URL(text); } catch { return err(`--${flag} "${raw}" is not a server address: give http://host:port or host:port`); }
  if (url.protocol !== "http:" && url.protocol !== "https:") return err(`--${flag} "${raw}": only http:// and https:// servers can be proxied`);
  if (url.search !== "" || url.hash !== "") return err(`--${flag} "${raw}": give the server's base URL without a query or fragment`);
  return ok(`${url.origin}${url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "")}`);
}

export function proxyConfig(options: Options, env: Readonly<Record<string, string | undefined>> = process.env): Result<ProxyConfig> {
  const lists: Record<"prefill" | "decode", string[]> = { prefill: [], decode: [] };
  for (const flag of ["prefill", "decode"] as const) {
    const values = options[flag];
    if (!Array.isArray(values) || values.length === 0) return err(`proxy needs --${flag} <url>... (one or more ${flag} servers, e.g. --${flag} http://127.0.0.1:${flag === "prefill" ? 8100 : 8200})`);
    for (const raw of values as readonly string[]) {
      const url = upstreamBaseUrl(flag, raw);
      if (!url.ok) return url;
      lists[flag].push(url.value);
    }
  }
  const log = logConfig(options, env);
  if (!log.ok) return log;
  return ok({
    prefill: lists.prefill, decode: lists.decode, host: stringOrNull(options.host) ?? "127.0.0.1", port: Number(options.port),
    upstreamTimeoutS: Number(options["upstream-timeout"]), log: log.value,
  });
}
