/**
 * Starting the servers the server-against-server benchmarks compare: llama.cpp's llama-server (built once from the
 * bundled tree by scripts/build-llama-tool.sh) and any server command, on a free loopback port, ready when /health
 * answers 200.
 */
import { basename, join } from "node:path";

const ROOT = join(import.meta.dir, "..");

/** `given` (a --llama-server path), else the one scripts/build-llama-tool.sh builds or finds. */
export function llamaServerPath(given: string | null): string {
  if (given !== null && given !== "") return given;
  const build = Bun.spawnSync([join(ROOT, "scripts", "build-llama-tool.sh"), "llama-server"], { stdout: "pipe", stderr: "inherit" });
  if (build.exitCode !== 0) throw new Error("scripts/build-llama-tool.sh llama-server failed");
  return build.stdout.toString().trim().split("\n").at(-1)!;
}

function freePort(): number {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

export interface Server { readonly url: string; readonly child: ReturnType<typeof Bun.spawn> }

/** Starts `command --host 127.0.0.1 --port P` with its output in `log` and `log.err`; waits up to 5 minutes. */
export async function startServer(command: string[], log: string): Promise<Server> {
  const port = freePort();
  const child = Bun.spawn([...command, "--host", "127.0.0.1", "--port", String(port)], { stdout: Bun.file(log), stderr: Bun.file(`${log}.err`) });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 3000; i++) {
    try { if ((await fetch(`${url}/health`)).status === 200) return { url, child }; } catch { /* not up yet */ }
    if (child.exitCode !== null) break;
    await Bun.sleep(100);
  }
  child.kill();
  throw new Error(`${basename(command[0]!)} did not start (see ${log}.err)`);
}
