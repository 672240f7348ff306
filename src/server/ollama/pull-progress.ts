/**
 * POST /api/pull (ollama server/routes.go PullHandler, server/images.go PullModel): fennec's Hugging Face download
 * (serve hands it in: ollama-serving.ts `pull`) told as Ollama's NDJSON progress records: `pulling manifest`,
 * `pulling <digest>` with total/completed bytes per file, `verifying sha256 digest`, `writing manifest`, `success`.
 * Names are Hub references: `org/repo[:QUANT]`, or Ollama's `hf.co/org/repo[:QUANT]` form. The downloaded model goes
 * into the Hugging Face cache; this server keeps serving its one model (serve the new one with `fennec serve org/repo`).
 * @example for await (const record of pullRecords(pull, "org/repo:Q8_0")) write(record);
 */
import { ApiError } from "../errors.ts";
import type { OllamaServing, PullEvent } from "./ollama-serving.ts";

/** Ollama's `hf.co/` (and `huggingface.co/`) prefix names a Hub repo: fennec's references are the repo itself. */
export function hubReference(name: string): string {
  const stripped = name.replace(/^(https?:\/\/)?(hf\.co|huggingface\.co)\//, "");
  if (!/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?$/.test(stripped)) {
    throw new ApiError("badRequest", `invalid model name "${name}": fennec pulls from the Hugging Face Hub, as org/repo[:QUANT] or hf.co/org/repo[:QUANT]`);
  }
  return stripped.endsWith(":latest") ? stripped.slice(0, -":latest".length) : stripped;
}

type Json = Record<string, unknown>;

function recordOf(event: PullEvent): Json[] {
  switch (event.kind) {
    case "manifest": return [{ status: "pulling manifest" }];
    case "file": return [{ status: `pulling ${event.digest.slice(0, 12)}`, digest: `sha256:${event.digest}`, total: event.totalBytes, completed: event.completedBytes }];
    case "verifying": return [{ status: "verifying sha256 digest" }];
    case "done": return [{ status: "writing manifest" }, { status: "success" }];
  }
}

/** The pull as records, in order; a failure is thrown (the stream writes it as an error line). */
export async function* pullRecords(pull: NonNullable<OllamaServing["pull"]>, name: string): AsyncGenerator<Json> {
  const queue: Json[] = [];
  let wake: (() => void) | null = null;
  let finished = false;
  let failure: unknown = null;
  const running = pull(hubReference(name), (event) => {
    queue.push(...recordOf(event));
    wake?.();
  }).then(() => { finished = true; wake?.(); }, (error: unknown) => { failure = error; finished = true; wake?.(); });
  for (;;) {
    while (queue.length > 0) yield queue.shift()!;
    if (finished) break;
    await new Promise<void>((resolve) => { wake = resolve; });
    wake = null;
  }
  await running;
  while (queue.length > 0) yield queue.shift()!;
  if (failure !== null) throw failure instanceof ApiError ? failure : new ApiError("internal", `pull ${name}: ${failure instanceof Error ? failure.message : String(failure)}`);
}
