/**
 * Running one prompt through the orchestrator on behalf of an HTTP request, for every dialect: the abort wiring
 * (client disconnect, server shutdown), engine errors as OpenAI errors (engine-errors.ts), and the per-choice
 * accumulation that non-streaming responses need. Framework-free.
 * @example const result = await collectGeneration(orchestrator, request, linkAbort(context.clientSignal, shutdownSignal));
 */
import type { PositionLogprobs } from "../../engine/protocol.ts";
import type { CompletionOutput, GenerateRequest, Orchestrator, RequestOutput } from "../../frontend/orchestrator.ts";
import { ApiError } from "../errors.ts";
import { engineErrorToApiError, GENERATION_FAILED } from "./engine-errors.ts";

// the engine's types as the orchestrator hands them over (server/ reads engine types only through pipeline/)
type FinishReason = NonNullable<CompletionOutput["finishReason"]>;
type RequestTimes = RequestOutput["times"];

/** One request's abort: fires on client disconnect, on server shutdown, or when the handler gives up. */
export interface RequestAbort {
  readonly controller: AbortController;
  /** true when the abort came from the server shutting down (the client gets an error, not a silent end) */
  readonly shuttingDown: () => boolean;
  /** the client went away (request signal, or the stream was cancelled): abort, and say so once */
  readonly clientGone: () => void;
  /** the HTTP exchange is over: detach from the signals and abort whatever still runs (a no-op once finished) */
  readonly dispose: () => void;
}

/** `onClientGone` runs once if the client leaves before the exchange is over (the server logs it). */
export function linkAbort(clientSignal: AbortSignal | undefined, shutdownSignal: AbortSignal, onClientGone: () => void = () => {}): RequestAbort {
  const controller = new AbortController();
  let over = false;
  const abort = () => controller.abort();
  const clientGone = () => {
    if (!over && !controller.signal.aborted) onClientGone();
    controller.abort();
  };
  clientSignal?.addEventListener("abort", clientGone, { once: true });
  shutdownSignal.addEventListener("abort", abort, { once: true });
  if (clientSignal?.aborted || shutdownSignal.aborted) controller.abort();
  return {
    controller,
    shuttingDown: () => shutdownSignal.aborted,
    clientGone,
    dispose: () => {
      over = true;
      clientSignal?.removeEventListener("abort", clientGone);
      shutdownSignal.removeEventListener("abort", abort);
      // e.g. one prompt of several failed: its siblings must not keep the engine busy
      controller.abort();
    },
  };
}

export const SHUTTING_DOWN = (): ApiError => new ApiError("unavailable", "The server is shutting down; the request was aborted.");

/**
 * orchestrator.generate with fennec's rules on top: an engine-side failure (finish reason "error") becomes a 500 like
 * vLLM; an abort during shutdown becomes a 503 error; an abort by the client just ends the iteration.
 */
export async function* generateOutputs(orchestrator: Orchestrator, request: GenerateRequest, abort: RequestAbort): AsyncGenerator<RequestOutput> {
  const signal = abort.controller.signal;
  try {
    for await (const output of orchestrator.generate(request, signal)) {
      if (output.outputs.some((o) => o.finishReason === "error")) throw GENERATION_FAILED();
      yield output;
      if (output.finished) break;
    }
  } catch (error) {
    if (!signal.aborted || error instanceof ApiError) throw engineErrorToApiError(error) ?? error;
  }
  if (signal.aborted && abort.shuttingDown()) throw SHUTTING_DOWN();
}

/** One choice, accumulated over the outputs. */
export interface ChoiceResult {
  readonly index: number;
  text: string;
  tokenIds: number[];
  logprobs: PositionLogprobs[];
  numGeneratedTokens: number;
  finishReason: FinishReason | null;
  stopReason: string | number | null;
}

export interface GenerationResult {
  readonly choices: ChoiceResult[];
  readonly numPromptTokens: number;
  readonly numCachedTokens: number;
  readonly times: RequestTimes | null;
  /** with sampling.promptLogprobs: one entry per prompt token (the first null) */
  readonly promptLogprobs: readonly (PositionLogprobs | null)[] | null;
  /** vLLM's response kv_transfer_params (a prefill instance's answer), null otherwise */
  readonly kvTransferParams: Readonly<Record<string, unknown>> | null;
}

export function newChoice(index: number): ChoiceResult {
  return { index, text: "", tokenIds: [], logprobs: [], numGeneratedTokens: 0, finishReason: null, stopReason: null };
}

/** Folds one output into the choices (indices 0..n-1). */
export function applyOutput(choices: ChoiceResult[], output: RequestOutput): void {
  for (const o of output.outputs) {
    const choice = choices[o.index] ?? (choices[o.index] = newChoice(o.index));
    choice.text += o.textDelta;
    choice.tokenIds.push(...o.tokenIdsDelta);
    if (o.logprobsDelta) choice.logprobs.push(...o.logprobsDelta);
    choice.numGeneratedTokens = o.numGeneratedTokens;
    if (o.finishReason !== null) {
      choice.finishReason = o.finishReason;
      choice.stopReason = o.stopReason;
    }
  }
}

/**
 * Runs a request to the end (non-streaming). A client that went away gets nothing, so the result is dropped.
 * `outputs`: a dialect's own run of the request (Anthropic's thinking budget), instead of generateOutputs.
 */
export async function collectGeneration(orchestrator: Orchestrator, request: GenerateRequest, abort: RequestAbort, outputs: AsyncIterable<RequestOutput> | null = null): Promise<GenerationResult> {
  const choices: ChoiceResult[] = [];
  for (let i = 0; i < request.sampling.n; i++) choices.push(newChoice(i));
  let last: RequestOutput | null = null;
  let promptLogprobs: readonly (PositionLogprobs | null)[] | null = null;
  for await (const output of outputs ?? generateOutputs(orchestrator, request, abort)) {
    applyOutput(choices, output);
    promptLogprobs ??= output.promptLogprobs ?? null;
    last = output;
  }
  for (const c of choices) if (c.finishReason === null) c.finishReason = "abort";
  return { choices, numPromptTokens: last?.numPromptTokens ?? request.promptTokenIds.length, numCachedTokens: last?.numCachedTokens ?? 0, times: last?.times ?? null, promptLogprobs, kvTransferParams: last?.kvTransferParams ?? null };
}

/**
 * Waits for the first item before the HTTP response starts, so that a request the engine refuses at once gets a
 * normal JSON error instead of a 200 stream holding an error event (vLLM validates before streaming, too; and its
 * role chunk is also sent with the first output).
 */
export async function primed<T>(source: AsyncIterable<T>): Promise<AsyncIterable<T>> {
  const iterator = source[Symbol.asyncIterator]();
  const first = await iterator.next();
  return {
    async *[Symbol.asyncIterator]() {
      if (first.done) return;
      let finished = false;
      try {
        yield first.value;
        for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
        finished = true;
      } finally {
        // the consumer stopped early (client gone): let the source clean up, as for-await would
        if (!finished) await iterator.return?.(undefined);
      }
    },
  };
}

/** Interleaves several async streams (completions with several prompts), in arrival order. */
export async function* mergeAsync<T>(sources: readonly AsyncIterable<T>[]): AsyncGenerator<T> {
  const iterators = sources.map((s) => s[Symbol.asyncIterator]());
  const pending = new Map<number, Promise<{ index: number; result: IteratorResult<T> }>>();
  const pull = (index: number) => pending.set(index, iterators[index]!.next().then((result) => ({ index, result })));
  iterators.forEach((_, i) => pull(i));
  try {
    while (pending.size > 0) {
      const { index, result } = await Promise.race(pending.values());
      if (result.done) { pending.delete(index); continue; }
      pull(index);
      yield result.value;
    }
  } finally {
    for (const index of pending.keys()) void iterators[index]!.return?.(undefined);
  }
}
