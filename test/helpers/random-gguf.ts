/**
 * Writes a make-model GGUF (seeded random weights in a real model's shape, its real tokenizer) into a temp folder
 * by running scripts/make-model.ts as a user would; cached per (shape, type, layers) for the test process.
 * @example const path = await makeModelFile("smollm2-135m", "q8_0", 1);
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const made = new Map<string, Promise<string>>();
let dir: string | null = null;

export function makeModelFile(shape: string, type: string, layers: number, extra: readonly string[] = []): Promise<string> {
  const key = [shape, type, layers, ...extra].join(" ");
  let path = made.get(key);
  if (path === undefined) {
    dir ??= mkdtempSync(join(tmpdir(), "fennec-models-"));
    const out = join(dir, `${key.replaceAll(/[^a-z0-9.]+/gi, "-")}.gguf`);
    path = (async () => {
      const child = Bun.spawn([process.execPath, "run", join(ROOT, "scripts", "make-model.ts"), "--shape", shape, "--type", type, "--layers", String(layers), ...extra, "--out", out], { stdout: "pipe", stderr: "pipe" });
      const [code, err] = await Promise.all([child.exited, new Response(child.stderr).text()]);
      if (code !== 0) throw new Error(`make-model ${key} failed (${code}): ${err}`);
      return out;
    })();
    made.set(key, path);
  }
  return path;
}
