/**
 * The build: AssemblyScript kernels -> build/*.wasm, the default model -> build/default-model.gguf, the web page ->
 * build/web-ui.html, then
 * `bun build --compile` -> dist/fennec (kernels, model and worker embedded), then a smoke run of the binary.
 * Usage: bun run build.ts [--skip-compile]
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { $ } from "bun";
import { ascCommand, kernelBuildPath } from "./src/backend/wasm/kernel-build.ts";
import { SIMD_LEVELS } from "./src/backend/wasm/simd-levels.ts";

const root = import.meta.dir;
const buildDir = join(root, "build");
const skipCompile = process.argv.includes("--skip-compile");

/** Workers must be bundled as entry points of the compiled binary. */
const ENTRYPOINTS = ["src/cli.ts", "src/engine/worker.ts", "src/backend/wasm/pool-worker.ts"];

function step(label: string): () => void {
  const t0 = performance.now();
  process.stdout.write(`build: ${label} ...\n`);
  return () => process.stdout.write(`build: ${label} done in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
}

async function compileKernels(): Promise<void> {
  if (!existsSync(join(root, "kernels", "index.ts"))) {
    process.stdout.write("build: no kernels/index.ts yet, skipping kernels\n");
    return;
  }
  for (const level of SIMD_LEVELS) {
    const done = step(`kernels (${level})`);
    await $`${ascCommand(level, kernelBuildPath(level))}`.cwd(root);
    done();
  }
}

async function buildDefaultModel(): Promise<void> {
  const done = step("default model (stories260K -> GGUF)");
  const { buildDefaultModel } = await import("./src/gguf/default-model-build.ts");
  await buildDefaultModel(join(root, "..", "shared", "models"), join(buildDir, "default-model.gguf"));
  done();
}

async function buildWebUi(): Promise<void> {
  const done = step("web page (src/server/web-ui -> build/web-ui.html)");
  const { buildWebUiPage } = await import("./src/server/web-ui/build-page.ts");
  const bytes = await buildWebUiPage(join(buildDir, "web-ui.html"));
  process.stdout.write(`build: web page is ${(bytes / 1024).toFixed(1)} KiB\n`);
  done();
}

async function compileBinary(): Promise<void> {
  const done = step("bun build --compile -> dist/fennec");
  const entries = ENTRYPOINTS.filter((e) => existsSync(join(root, e)));
  await $`${process.execPath} build --compile --minify-syntax ${entries} --outfile ${join(root, "dist", "fennec")}`.cwd(root);
  done();
  const version = await $`${join(root, "dist", "fennec")} --version`.cwd("/").text();
  process.stdout.write(`build: smoke run from / -> ${version}`);
}

mkdirSync(buildDir, { recursive: true });
await compileKernels();
await buildDefaultModel();
await buildWebUi();
if (!skipCompile) await compileBinary();
