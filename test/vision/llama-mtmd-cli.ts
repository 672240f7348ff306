/**
 * Where the vision oracle is: FENNEC_LLAMA_MTMD_CLI, else the binary scripts/build-llama-tool.sh llama-mtmd-cli built
 * into .cache/llama-mtmd/<bundle commit>/bin/; null when it is not built (its tests skip).
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

export function llamaMtmdCliPath(): string | null {
  const fromEnv = process.env.FENNEC_LLAMA_MTMD_CLI;
  if (fromEnv) return fromEnv;
  const cache = join(import.meta.dir, "..", "..", ".cache", "llama-mtmd");
  if (!existsSync(cache)) return null;
  for (const commit of readdirSync(cache)) {
    const bin = join(cache, commit, "bin", "llama-mtmd-cli");
    if (existsSync(bin)) return bin;
  }
  return null;
}
