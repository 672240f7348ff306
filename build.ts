/**
 * The build: AssemblyScript kernels -> build/*.wasm, the default model -> build/default-model.gguf, the web page ->
 * build/web-ui.html, then
 * `bun build --compile` -> dist/fennec (kernels, model and worker embedded), then a smoke run of the binary.
 * Release builds: `--target linux-x64 | linux-x64-baseline | linux-arm64 | all` (repeatable, or comma-separated)
 * writes dist/fennec-<target> for each (Bun cross-compiles: it fetches that target's runtime once) and
 * dist/SHA256SUMS over them (`sha256sum -c SHA256SUMS` checks a download). A binary this machine can run is smoke-run;
 * an arm64 one under qemu-user when `qemu-aarch64-static` is installed (scripts/install-test-deps.sh).
 * Usage: bun run build.ts [--skip-compile] [--target T]...
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { $ } from "bun";
import { BUILD_TARGETS, type BuildTarget } from "./src/util/build-target.ts";
import { ascCommand, kernelBuildPath } from "./src/backend/wasm/kernel-build.ts";
import { SIMD_LEVELS } from "./src/backend/wasm/simd-levels.ts";

const root = import.meta.dir;
const buildDir = join(root, "build");
const skipCompile = process.argv.includes("--skip-compile");
const distDir = join(root, "dist");

/** The --target values, `all` expanded; a bad one stops the build with the list of good ones (exit 2). */
function requestedTargets(argv: readonly string[]): BuildTarget[] {
  const names: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--target") names.push(...(argv[++i] ?? "").split(","));
    else if (argv[i]!.startsWith("--target=")) names.push(...argv[i]!.slice("--target=".length).split(","));
  }
  const known = Object.keys(BUILD_TARGETS) as BuildTarget[];
  const out = new Set<BuildTarget>();
  for (const name of names) {
    if (name === "all") known.forEach((t) => out.add(t));
    else if ((known as string[]).includes(name)) out.add(name as BuildTarget);
    else {
      process.stderr.write(`build: unknown --target "${name}" (targets: ${known.join(", ")}, all)\n`);
      process.exit(2);
    }
  }
  return [...out];
}
const targets = requestedTargets(process.argv.slice(2));

/** Workers must be bundled as entry points of the compiled binary. */
const ENTRYPOINTS = ["src/cli.ts", "src/engine/worker.ts", "src/backend/wasm/pool-worker.ts", "src/grammar/grammar-worker.ts", "src/grammar/check-worker.ts", "src/server/json-parse-worker.ts", "src/vision/vision-worker.ts"];

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
  // ../shared/models when it is there, else the pinned download (HF_ENDPOINT moves the host); a failure is one line
  await buildDefaultModel(join(root, "..", "shared", "models"), join(buildDir, "default-model.gguf")).catch((e: unknown) => {
    process.stderr.write(`build: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  });
  done();
}

async function buildWebUi(): Promise<void> {
  const done = step("web page (src/server/web-ui -> build/web-ui.html)");
  const { buildWebUiPage } = await import("./src/server/web-ui/build-page.ts");
  const bytes = await buildWebUiPage(join(buildDir, "web-ui.html"));
  process.stdout.write(`build: web page is ${(bytes / 1024).toFixed(1)} KiB\n`);
  done();
}

/** `bun build --compile` of the entry points into `out`, for Bun's `bunTarget` (null: this machine's), naming `target`. */
async function compile(out: string, target: string, bunTarget: string | null): Promise<void> {
  const entries = ENTRYPOINTS.filter((e) => existsSync(join(root, e)));
  const targetFlag = bunTarget === null ? [] : [`--target=${bunTarget}`];
  // FENNEC_TARGET: what `fennec --version` names (src/util/build-target.ts)
  await $`${process.execPath} build --compile --minify-syntax ${targetFlag} --define ${`FENNEC_TARGET=${JSON.stringify(target)}`} ${entries} --outfile ${out}`.cwd(root).quiet();
}

/** The command that runs a binary of `target` here, or null when this machine cannot. */
function runnerFor(target: BuildTarget): string[] | null {
  const arch = BUILD_TARGETS[target].arch;
  if (process.platform !== "linux") return null;
  if (arch === process.arch) return [];
  if (arch === "arm64" && Bun.which("qemu-aarch64-static") !== null && existsSync("/usr/aarch64-linux-gnu")) return ["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"];
  return null;
}

async function smokeRun(binary: string, runner: readonly string[]): Promise<void> {
  const version = await $`${[...runner, binary]} --version`.cwd("/").text();
  process.stdout.write(`build: smoke run of ${basename(binary)} from / -> ${version}`);
}

async function compileBinary(): Promise<void> {
  const done = step("bun build --compile -> dist/fennec");
  await compile(join(distDir, "fennec"), `${process.platform}-${process.arch}`, null);
  done();
  await smokeRun(join(distDir, "fennec"), []);
}

/** dist/fennec-<target> for each target, then dist/SHA256SUMS over them. */
async function compileReleases(list: readonly BuildTarget[]): Promise<void> {
  for (const target of list) {
    const out = join(distDir, `fennec-${target}`);
    const done = step(`bun build --compile --target=${BUILD_TARGETS[target].bun} -> dist/fennec-${target}`);
    await compile(out, target, BUILD_TARGETS[target].bun);
    done();
    const runner = runnerFor(target);
    if (runner === null) process.stdout.write(`build: dist/fennec-${target} not smoke-run (this machine cannot run ${target})\n`);
    else await smokeRun(out, runner);
  }
  // only this run's binaries: an older file beside them may be of another version
  const lines = list.map((t) => `fennec-${t}`)
    .map((name) => `${new Bun.CryptoHasher("sha256").update(readFileSync(join(distDir, name))).digest("hex")}  ${name}\n`);
  writeFileSync(join(distDir, "SHA256SUMS"), lines.join(""));
  process.stdout.write(`build: dist/SHA256SUMS (${lines.length} binaries)\n`);
}

mkdirSync(buildDir, { recursive: true });
await compileKernels();
await buildDefaultModel();
await buildWebUi();
mkdirSync(distDir, { recursive: true });
if (!skipCompile && targets.length === 0) await compileBinary();
if (!skipCompile && targets.length > 0) await compileReleases(targets);
