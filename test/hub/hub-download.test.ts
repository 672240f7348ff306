/**
 * Models by name: `fennec pull` and `--model org/repo[:QUANT]` against a local stand-in for the Hugging Face Hub
 * (hub-stand-in.ts; the real Hub cannot be reached from here): the cache layout huggingface_hub writes, a resumed
 * download after a cut connection, a corrupted download refused by its SHA-256, names that do not exist, offline and
 * cached runs, the token, a progress bar on a terminal and one log line per event otherwise, split models, and the
 * served name of a Hub model.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultModelPath } from "../../src/gguf/default-model.ts";
import { startHubStandIn, type HubStandIn } from "./hub-stand-in.ts";
import { splitGgufFile } from "../helpers/split-gguf-file.ts";
import { startServer } from "../e2e/server-process.ts";

setDefaultTimeout(120_000);

const ROOT = join(import.meta.dir, "..", "..");
const CLI = join(ROOT, "src", "cli.ts");
const dir = mkdtempSync(join(tmpdir(), "fennec-hub-"));
const MODEL = new Uint8Array(readFileSync(defaultModelPath()));
// a second quantization of the "same" model: other bytes, so a wrong pick is visible
const OTHER = MODEL.slice();
OTHER[OTHER.length - 1] ^= 1;
const parts = splitGgufFile(defaultModelPath(), join(dir, "stories-Q8_0"), 2).map((p) => new Uint8Array(readFileSync(p)));

const REPO = "fennec-test/stories260K-GGUF";
const SPLIT_REPO = "fennec-test/stories260K-split-GGUF";
let hub: HubStandIn;

beforeAll(async () => {
  hub = await startHubStandIn({
    [REPO]: { files: { "README.md": new TextEncoder().encode("# stories\n"), "stories260K-Q8_0.gguf": MODEL, "stories260K-Q4_K_M.gguf": OTHER, "mmproj-stories.gguf": OTHER } },
    [SPLIT_REPO]: { files: { "stories-Q8_0-00001-of-00002.gguf": parts[0]!, "stories-Q8_0-00002-of-00002.gguf": parts[1]! } },
  });
});
afterAll(async () => {
  await hub.close();
  rmSync(dir, { recursive: true, force: true });
});

let homes = 0;
/** a fresh HF_HOME per case, so no case sees another's cache unless it asks for it */
const newHome = (): string => join(dir, `home-${++homes}`);

interface Run { code: number | null; stdout: string; stderr: string }

/** the CLI as a child process (async: the stand-in answers from this process's event loop) */
async function fennec(args: readonly string[], env: Record<string, string>, command?: readonly string[]): Promise<Run> {
  const child = Bun.spawn([...(command ?? [process.execPath, CLI, ...args])], {
    stdout: "pipe", stderr: "pipe", stdin: "ignore",
    env: { ...process.env, HF_ENDPOINT: hub.url, HF_TOKEN: "", HF_HUB_OFFLINE: "", HF_HUB_CACHE: "", ...env },
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const [code, stdout, stderr] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");
const repoFolder = (home: string, repo: string): string => join(home, "hub", `models--${repo.replace("/", "--")}`);
const lfsRequests = (): number => hub.requests.filter((r) => r.path.startsWith("/lfs/")).length;

describe("fennec pull", () => {
  test("fetches the tagged GGUF into the Hugging Face cache layout and prints its path; a second pull downloads nothing", async () => {
    const home = newHome();
    const r = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home });
    expect(r.stderr).not.toContain("fennec: ");
    expect(r.code).toBe(0);
    const folder = repoFolder(home, REPO);
    const commit = hub.commitOf(REPO);
    const snapshot = join(folder, "snapshots", commit, "stories260K-Q8_0.gguf");
    expect(r.stdout).toBe(`${snapshot}\n`);
    expect(readFileSync(join(folder, "refs", "main"), "utf8")).toBe(commit);
    // snapshots link to blobs named by the SHA-256, relatively, as huggingface_hub writes them
    expect(lstatSync(snapshot).isSymbolicLink()).toBe(true);
    expect(readlinkSync(snapshot)).toBe(join("..", "..", "blobs", sha256(MODEL)));
    expect(new Uint8Array(readFileSync(snapshot))).toEqual(MODEL);
    expect(readdirSync(join(folder, "blobs"))).toEqual([sha256(MODEL)]);
    // not a terminal: log lines, no progress bar
    expect(r.stderr).toContain(`downloading stories260K-Q8_0.gguf of ${REPO}`);
    expect(r.stderr).toContain("SHA-256 checked");
    expect(r.stderr).not.toContain("\r");
    for (const line of r.stderr.trimEnd().split("\n")) expect(line).toMatch(/^INFO \d\d-\d\d \d\d:\d\d:\d\d \[hub\] /);

    const before = lfsRequests();
    const again = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home });
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(r.stdout);
    expect(again.stderr).toContain("is in the cache");
    expect(lfsRequests()).toBe(before);
  });

  test("without a tag it takes llama.cpp's default Q4_K_M; projector files are never the model", async () => {
    const home = newHome();
    const r = await fennec(["pull", REPO], { HF_HOME: home });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toEndWith("stories260K-Q4_K_M.gguf");
    expect(new Uint8Array(readFileSync(r.stdout.trim()))).toEqual(OTHER);
    expect(r.stderr).toContain("the default tag Q4_K_M");
  });

  test("hf://org/repo/file.gguf names an exact file; --revision takes the commit", async () => {
    const home = newHome();
    const r = await fennec(["pull", `hf://${REPO}/stories260K-Q8_0.gguf`, "--revision", hub.commitOf(REPO)], { HF_HOME: home });
    expect(r.code).toBe(0);
    expect(new Uint8Array(readFileSync(r.stdout.trim()))).toEqual(MODEL);
    // a commit hash is its own ref: nothing written under refs/
    expect(existsSync(join(repoFolder(home, REPO), "refs"))).toBe(false);
  });

  test("an interrupted download resumes where it stopped (Range) and is checked whole", async () => {
    const home = newHome();
    const cutAt = 300_000;
    hub.faults.cutNextDownloadAfter = cutAt;
    const first = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home });
    expect(first.code).toBe(1);
    expect(first.stderr).toContain("run the same command again to resume");
    const partial = join(repoFolder(home, REPO), "blobs", `${sha256(MODEL)}.incomplete`);
    expect(statSync(partial).size).toBe(cutAt);
    expect(existsSync(join(repoFolder(home, REPO), "snapshots"))).toBe(false);

    const seen = hub.requests.length;
    const second = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home });
    expect(second.code).toBe(0);
    expect(second.stderr).toContain(`resuming stories260K-Q8_0.gguf of ${REPO} at`);
    const download = hub.requests.slice(seen).find((q) => q.path.startsWith("/lfs/"));
    expect(download?.range).toBe(`bytes=${cutAt}-`);
    expect(new Uint8Array(readFileSync(second.stdout.trim()))).toEqual(MODEL);
    expect(existsSync(partial)).toBe(false);
  });

  test("a corrupted download is refused by its SHA-256 and leaves nothing to load", async () => {
    const home = newHome();
    hub.faults.corrupt = true;
    try {
      const r = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`stories260K-Q8_0.gguf from ${REPO} is corrupted: its SHA-256 is`);
      expect(r.stdout).toBe("");
      const blobs = join(repoFolder(home, REPO), "blobs");
      expect(existsSync(blobs) ? readdirSync(blobs) : []).toEqual([]);
    } finally {
      hub.faults.corrupt = false;
    }
  });

  test("names that do not exist: one line each, saying what to check", async () => {
    const home = newHome();
    const cases: [string[], string][] = [
      [["pull", "fennec-test/no-such-repo"], "repository fennec-test/no-such-repo not found on the Hugging Face Hub"],
      [["pull", `${REPO}:Q2_K`], `${REPO} has no GGUF file for the tag Q2_K; its files carry: Q4_K_M, Q8_0`],
      [["pull", `hf://${REPO}/missing.gguf`], `${REPO} has no file missing.gguf`],
      [["pull", REPO, "--revision", "no-such-branch"], "revision not found"],
    ];
    for (const [args, says] of cases) {
      const r = await fennec(args, { HF_HOME: home });
      expect({ args, code: r.code }).toEqual({ args, code: 1 });
      expect(r.stderr.trimEnd().split("\n").at(-1)).toContain(says);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    // a local path is never sent to the Hub
    const local = await fennec(["pull", "./models/x.gguf"], { HF_HOME: home });
    expect(local.code).toBe(2);
    expect(local.stderr).toContain("is a local path");
  });

  test("offline: the cache only, without a single request; a model not cached says how to get it", async () => {
    const home = newHome();
    const seen = hub.requests.length;
    const missing = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home, HF_HUB_OFFLINE: "1" });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("HF_HUB_OFFLINE is set");
    expect(missing.stderr).toContain(`fennec pull ${REPO}:Q8_0`);
    expect(hub.requests.length).toBe(seen);

    expect((await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home })).code).toBe(0);
    const online = hub.requests.length;
    const cached = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home, HF_HUB_OFFLINE: "1" });
    expect(cached.code).toBe(0);
    expect(cached.stderr).toContain("from the cache (offline");
    expect(hub.requests.length).toBe(online);
    // HF_HUB_CACHE moves the cache; a Hub that cannot be reached falls back to it, as huggingface_hub does
    const moved = await fennec(["pull", `${REPO}:Q8_0`], { HF_HUB_CACHE: join(home, "hub"), HF_HOME: join(dir, "elsewhere"), HF_ENDPOINT: "http://127.0.0.1:9" });
    expect(moved.code).toBe(0);
    expect(moved.stdout).toBe(cached.stdout);
    expect(moved.stderr).toContain("cannot reach the Hugging Face Hub at http://127.0.0.1:9");
  });

  test("HF_TOKEN (or --hf-token) is sent as the bearer token; a gated repo without it says so", async () => {
    hub.faults.requiredToken = "hf_secret";
    try {
      const denied = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: newHome() });
      expect(denied.code).toBe(1);
      expect(denied.stderr).toContain("set HF_TOKEN");
      const home = newHome();
      writeFileSync(join(dir, "token"), "hf_secret\n");
      const fromFile = await fennec(["pull", `${REPO}:Q8_0`], { HF_HOME: home, HF_TOKEN_PATH: join(dir, "token") });
      expect(fromFile.code).toBe(0);
      const flag = await fennec(["pull", `${REPO}:Q4_K_M`, "--hf-token", "hf_secret"], { HF_HOME: home });
      expect(flag.code).toBe(0);
      expect(hub.requests.at(-1)?.authorization).toBe("Bearer hf_secret");
    } finally {
      hub.faults.requiredToken = null;
    }
  });

  test("a progress bar on a terminal (script gives the command a pty)", async () => {
    const home = newHome();
    const command = [process.execPath, CLI, "pull", `${REPO}:Q8_0`].map((a) => `'${a}'`).join(" ");
    const run = await fennec([], { HF_HOME: home }, ["script", "-qec", command, "/dev/null"]);
    const out = run.stdout;
    expect(run.code).toBe(0);
    expect(out).toMatch(/\rdownloading stories260K-Q8_0\.gguf \[#+-*\] +\d+% /);
    expect(out).toContain("\x1b[2K");
  });

  test("a split model: every part is fetched, and the first part loads as the whole model", async () => {
    const home = newHome();
    const r = await fennec(["pull", `${SPLIT_REPO}:Q8_0`], { HF_HOME: home });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toEndWith("stories-Q8_0-00001-of-00002.gguf");
    expect(r.stderr).toContain("stories-Q8_0-00002-of-00002.gguf");
    const args = ["generate", "--prompt", "Once upon a time", "--max-tokens", "12", "--temperature", "0"];
    const split = await fennec([...args, "--model", r.stdout.trim()], { HF_HOME: home });
    const whole = await fennec([...args, "--model", defaultModelPath()], { HF_HOME: home });
    expect(split.code).toBe(0);
    expect(split.stdout.length).toBeGreaterThan("Once upon a time".length);
    expect(split.stdout).toBe(whole.stdout);
  });
});

describe("serve --model org/repo:QUANT", () => {
  test("serves the fetched model under the argument as given (vLLM's served_model_name default), in the API and the metrics", async () => {
    const home = newHome();
    const server = await startServer(["--model", `${REPO}:Q8_0`], { env: { HF_ENDPOINT: hub.url, HF_HOME: home, HF_TOKEN: "", HF_HUB_OFFLINE: "" } });
    try {
      const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string; root: string }[] };
      expect(models.data.map((m) => m.id)).toEqual([`${REPO}:Q8_0`]);
      expect(models.data[0]!.root).toEndWith("stories260K-Q8_0.gguf");
      const one = await fetch(`${server.url}/v1/models/${REPO}:Q8_0`);
      expect(one.status).toBe(200);
      expect(((await one.json()) as { id: string }).id).toBe(`${REPO}:Q8_0`);
      const missing = await fetch(`${server.url}/v1/models/other`);
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { message: string } }).error.message).toBe("The model `other` does not exist.");
      const done = await fetch(`${server.url}/v1/completions`, {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: `${REPO}:Q8_0`, prompt: "Once upon a time", max_tokens: 4, temperature: 0 }),
      });
      expect(done.status).toBe(200);
      expect(((await done.json()) as { model: string }).model).toBe(`${REPO}:Q8_0`);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toContain(`vllm:num_requests_running{model_name="${REPO}:Q8_0"`);
      expect(server.log()).toContain(`downloading stories260K-Q8_0.gguf of ${REPO}`);
    } finally {
      await server.stop();
    }
  });
});
