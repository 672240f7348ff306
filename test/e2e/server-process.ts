/**
 * Starts the real server as a child process for black-box tests: `dist/fennec serve` when the binary is built from
 * the current sources, else `bun run src/cli.ts serve`. Waits for /health, keeps the log, and stops it (SIGTERM, then SIGKILL).
 * @example const server = await startServer(["--api-key", "k"]); ...; await server.stop();
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const BINARY = join(ROOT, "dist", "fennec");
const START_TIMEOUT_MS = 120_000;

export interface ServerProcess {
  readonly url: string;
  readonly port: number;
  /** everything the server wrote to stdout and stderr so far */
  log(): string;
  /** resolves with the exit code */
  stop(signal?: NodeJS.Signals): Promise<number>;
  readonly process: ReturnType<typeof Bun.spawn>;
}

/** Newest modification time of any file under `dir` (ms). */
export function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtimeMs(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * The binary when it is built from the current sources; the sources otherwise (a binary older than src/ would test
 * old code). FENNEC_E2E_SOURCE=1 forces the sources.
 */
export function serverCommand(): string[] {
  const fresh = existsSync(BINARY) && statSync(BINARY).mtimeMs >= newestMtimeMs(join(ROOT, "src"));
  return fresh && process.env.FENNEC_E2E_SOURCE !== "1" ? [BINARY, "serve"] : [process.execPath, "run", join(ROOT, "src", "cli.ts"), "serve"];
}

/** A port nothing listens on right now (the kernel's pick for port 0). */
export function freePort(): number {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

async function drain(stream: ReadableStream<Uint8Array>, into: string[]): Promise<void> {
  const decoder = new TextDecoder();
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    into.push(decoder.decode(value, { stream: true }));
  }
}

export interface StartOptions {
  /** extra environment variables (VLLM_LOGGING_LEVEL, VLLM_LOG_STATS_INTERVAL, ...) */
  readonly env?: Readonly<Record<string, string>>;
  /** the server speaks HTTPS (--ssl-certfile): poll /health over TLS, trusting any certificate */
  readonly https?: boolean;
  /** the TLS options of the /health polls (client certificates); default: trust any server certificate */
  readonly healthTls?: { readonly ca?: string; readonly cert?: string; readonly key?: string };
  /** prefix of every route (--root-path) */
  readonly rootPath?: string;
  /** the command before the serve flags (default serverCommand()) */
  readonly command?: readonly string[];
  /** the route that answers 200 once the process is ready (default /health) */
  readonly readyPath?: string;
}

/**
 * Runs `fennec serve` with extra args (not the port) and resolves once /health answers 200. freePort() closes its probe
 * before the server binds, so another process (a parallel test run's client socket) may take the port in between:
 * that one refusal is retried on a new port, any other early exit is thrown.
 */
export async function startServer(args: readonly string[] = [], start: StartOptions = {}): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startServerOnce(args, start);
    } catch (error) {
      if (attempt === 3 || !(error instanceof PortTakenError)) throw error;
    }
  }
}

class PortTakenError extends Error {}

async function startServerOnce(args: readonly string[], start: StartOptions): Promise<ServerProcess> {
  const port = freePort();
  const output: string[] = [];
  const child = Bun.spawn([...(start.command ?? serverCommand()), "--host", "127.0.0.1", "--port", String(port), ...args], {
    cwd: ROOT, stdout: "pipe", stderr: "pipe", stdin: "ignore", env: { ...process.env, ...start.env },
  });
  void drain(child.stdout as ReadableStream<Uint8Array>, output);
  void drain(child.stderr as ReadableStream<Uint8Array>, output);
  const url = `${start.https ? "https" : "http"}://127.0.0.1:${port}${start.rootPath ?? ""}`;
  let stopping = false;
  let ready = false;
  // a server that dies under a test says why in the test's output (its log is otherwise lost with the process)
  void child.exited.then((code) => {
    if (stopping || !ready) return;
    const tail = output.join("").split("\n").slice(-40).join("\n");
    console.error(`fennec serve ${args.join(" ")} exited on its own with ${code}; its last log lines:\n${tail}`);
  });
  const server: ServerProcess = {
    url, port, process: child,
    log: () => output.join(""),
    stop: async (signal = "SIGTERM") => {
      stopping = true;
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const code = await child.exited;
      clearTimeout(timer);
      return code;
    },
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      const message = `server exited with ${child.exitCode} before it was ready:\n${server.log()}`;
      throw server.log().includes(`cannot listen on 127.0.0.1:${port}`) ? new PortTakenError(message) : new Error(message);
    }
    try {
      if ((await fetch(`${url}${start.readyPath ?? "/health"}`, { tls: start.healthTls ?? { rejectUnauthorized: false } })).status === 200) {
        ready = true;
        return server;
      }
    } catch {
      // not listening yet
    }
    await Bun.sleep(100);
  }
  await server.stop("SIGKILL");
  throw new Error(`server not ready after ${START_TIMEOUT_MS} ms:\n${server.log()}`);
}

/** Runs `fennec serve` expecting it to refuse to start; resolves with its exit code and output. */
export async function runServeExpectingExit(args: readonly string[]): Promise<{ code: number; output: string }> {
  const child = Bun.spawn([...serverCommand(), ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
  clearTimeout(timer);
  return { code, output: out + err };
}
