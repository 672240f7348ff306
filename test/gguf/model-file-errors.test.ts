/**
 * A model file that cannot be opened is named for why. A directory the user cannot traverse is
 * "permission denied" (was "file not found"), a GGUF over 32 GiB names the limit of 8 wasm32 memories (was "cannot read the file
 * (ENOMEM ...)"). Permissions need a user other than root (root reads everything): the CLI runs as nobody through
 * setpriv, a real process and a real EACCES.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, closeSync, copyFileSync, existsSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mapInWindows, MAX_MODEL_FILE_BYTES, readGguf, readTensorBytes, tensorData, tensorFileRange } from "../../src/gguf/reader.ts";
import { writeGgufFile } from "../../src/gguf/writer.ts";
import { makeTinyModel, TINY_SHAPES } from "../model/tiny-model.ts";

const ROOT = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "fennec-model-errors-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
chmodSync(dir, 0o755);

describe("model file errors", () => {
  const asNobody = process.getuid?.() === 0 && existsSync("/usr/bin/setpriv");

  test.skipIf(!asNobody)("a model in a directory the user cannot traverse: permission denied, one line, not 'file not found'", async () => {
    const locked = join(dir, "locked");
    mkdirSync(locked);
    copyFileSync(join(ROOT, "build", "default-model.gguf"), join(locked, "model.gguf"));
    chmodSync(locked, 0o700); // root's: nobody cannot enter it
    const proc = Bun.spawn(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, join(ROOT, "src", "cli.ts"),
      "tokenize", "--model", join(locked, "model.gguf"), "--text", "hi"], { stdout: "pipe", stderr: "pipe", env: { ...process.env, HOME: dir } });
    const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).not.toBe(0);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toContain(`${join(locked, "model.gguf")}: permission denied`);
    expect(stderr).not.toContain("not found");
  }, 30_000);

  test("a missing file is still 'file not found'", () => {
    const result = readGguf(join(dir, "absent.gguf"));
    expect(result.ok ? "" : result.error).toBe(`${join(dir, "absent.gguf")}: file not found`);
  });

  test("a GGUF over 32 GiB (8 wasm32 memories) names the limit before mapping anything (a sparse file: no disk used)", () => {
    const path = join(dir, "huge.gguf");
    const fd = openSync(path, "w");
    ftruncateSync(fd, MAX_MODEL_FILE_BYTES + 4096);
    closeSync(fd);
    const result = readGguf(path);
    expect(result.ok).toBe(false);
    expect(result.ok ? "" : result.error).toMatch(/huge\.gguf: the file is 32\.00 GiB, over the 32 GiB limit: .*8 wasm32 memories/);
  });

  test("a file rewritten while the model loads: reading its tensors is refused with one line", () => {
    const path = join(dir, "rewritten.gguf");
    const model = makeTinyModel(TINY_SHAPES.llama!, { seed: 4 });
    const tensors = model.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: tensorData(model, t) }));
    writeGgufFile(path, { metadata: model.metadata, tensors });
    const file = readGguf(path);
    if (!file.ok) throw new Error(file.error);
    const range = tensorFileRange(file.value, file.value.tensors[0]!)!;
    const into: Uint8Array = new Uint8Array(16);
    readTensorBytes(range, 0, into);
    expect(into).toEqual(tensorData(model, model.tensors[0]!).subarray(0, 16));
    writeGgufFile(path, { metadata: model.metadata, tensors: tensors.slice(1) });
    expect(() => readTensorBytes(range, 0, into)).toThrow(/rewritten\.gguf: the file was replaced or rewritten while the model was loading; start again once it is complete$/);
  });

  test("a file larger than one typed array is mapped in windows of whole tensors: every tensor reads the same bytes", () => {
    // the real limit is 2 GiB a window (a 4.9 GB llama-3.1-8b q4_k_m maps in 3); here 16 KiB windows over a tiny model
    const path = join(dir, "windows.gguf");
    const model = makeTinyModel({ ...TINY_SHAPES.qwen2!, numLayers: 3 }, { seed: 2 });
    const size = writeGgufFile(path, { metadata: model.metadata, tensors: model.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type, data: tensorData(model, t) })) });
    const whole = readGguf(path);
    const windowed = mapInWindows(path, size, 16384);
    if (!whole.ok || !windowed.ok) throw new Error(whole.ok ? (windowed as { error: string }).error : whole.error);
    expect(windowed.value.parts!.length).toBeGreaterThan(3);
    for (const p of windowed.value.parts!) expect(p.length).toBeLessThanOrEqual(16384);
    expect(windowed.value.metadata).toEqual(whole.value.metadata);
    whole.value.tensors.forEach((t, i) => expect(tensorData(windowed.value, windowed.value.tensors[i]!)).toEqual(tensorData(whole.value, t)));
    // and the same bytes read from the file at each window's offset (what the WASM backend loads through)
    windowed.value.tensors.forEach((t, i) => {
      const read: Uint8Array = new Uint8Array(t.sizeBytes - 3);
      readTensorBytes(tensorFileRange(windowed.value, t)!, 3, read);
      expect(read).toEqual(tensorData(whole.value, whole.value.tensors[i]!).subarray(3));
    });
    expect(mapInWindows(path, size, 8192)).toMatchObject({ ok: false, error: expect.stringMatching(/: tensor \S+ holds \d+ bytes, more than one mapping can \(8192 bytes\)$/) });
  });
});
