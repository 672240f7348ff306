/**
 * Finds a Worker entry point's code. From source it sits next to the caller; inside a `bun build --compile` binary every
 * entry point sits under /$bunfs/root at its path relative to the entry points' common folder (src/ for build.ts's
 * list), and neither import.meta.url nor Bun.main (which names the *current* thread's entry, e.g. engine/worker.js
 * inside the engine Worker) points at that root, so the root is cut out of Bun.main.
 * @example new Worker(workerEntryUrl(import.meta.url, "./worker.ts", "engine/worker.js"))
 */
import { existsSync } from "node:fs";
import { join } from "node:path";

const BUNFS_ROOT = /^(.*\/\$bunfs\/root)(\/|$)/;

export function workerEntryUrl(callerUrl: string, sourceRelative: string, compiledPath: string): string {
  if (!callerUrl.includes("$bunfs")) return new URL(sourceRelative, callerUrl).href;
  const root = BUNFS_ROOT.exec(Bun.main)?.[1] ?? "/$bunfs/root";
  const candidates = [compiledPath, `src/${compiledPath}`];
  for (const rel of candidates) if (existsSync(join(root, rel))) return join(root, rel);
  throw new Error(`${compiledPath} is not in this binary (looked under ${root}); build it with build.ts`);
}
