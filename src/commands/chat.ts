/**
 * `fennec chat` (vLLM's `vllm chat`, Ollama's `ollama run`): a terminal chat against an OpenAI-compatible server
 * (--url, streaming /chat/completions) or an in-process engine on --model (the chat template, then the engine).
 * Type a message and Enter; multi-line input between `"""` lines or with a trailing `\`; /clear, /system TEXT,
 * /history, /bye. Ctrl-C stops an answer and keeps the chat; at the prompt it clears the line; Ctrl-D leaves.
 * Up/down recall earlier input (readline's history).
 */
import { createInterface, type Interface } from "node:readline";
import type { InProcessEngineConfig } from "../command-line/in-process-engine-config.ts";
import { chatConfig, type ChatConfig, type ChatSampling } from "../command-line/chat-config.ts";
import type { Options } from "../command-line/flags.ts";
import { DEFAULT_SAMPLING_PARAMS } from "../engine/sampling-params.ts";
import { createEngineFrontend } from "../frontend/engine-frontend.ts";
import type { Orchestrator } from "../frontend/orchestrator.ts";
import type { ChatMessage } from "../tokenizer/tokenizer.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { nowMs } from "../util/clock.ts";
import { errorMessage } from "../util/error-message.ts";

/** One streamed piece of an answer: its text, or reasoning (a server's reasoning parser puts thinking there). */
interface AnswerPiece {
  readonly kind: "content" | "reasoning";
  readonly text: string;
}

/** Where answers come from: pieces as they stream; aborting the signal ends the stream. */
interface ChatBackend {
  readonly label: string;
  stream(messages: readonly ChatMessage[], signal: AbortSignal): AsyncIterable<AnswerPiece>;
  close(): Promise<void>;
}

/** --url: the OpenAI chat API with stream: true; the model is --model-name or the first of /models. */
async function remoteBackend(url: string, config: ChatConfig, sampling: ChatSampling): Promise<ChatBackend> {
  const base = url.replace(/\/+$/, "");
  const key = config.apiKey;
  const headers: Record<string, string> = { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
  let model = config.modelName;
  if (model === null) {
    try {
      const res = await fetch(`${base}/models`, { headers });
      if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
      model = ((await res.json()) as { data?: { id?: string }[] }).data?.[0]?.id ?? null;
      if (model === null) throw new Error("no model listed");
    } catch (e) {
      throw new RuntimeFailure(`cannot read ${base}/models (${errorMessage(e)}): is the server up? --url is the API base, e.g. http://localhost:8000/v1`);
    }
  }
  const chosen = model;
  return {
    label: `${chosen} at ${base}`,
    async *stream(messages, signal) {
      const body = {
        model: chosen, messages, stream: true,
        ...(sampling.maxTokens === null ? {} : { max_tokens: sampling.maxTokens }),
        ...(sampling.temperature === null ? {} : { temperature: sampling.temperature }),
        ...(sampling.topP === null ? {} : { top_p: sampling.topP }),
        ...(sampling.topK === null ? {} : { top_k: sampling.topK }),
      };
      const res = await fetch(`${base}/chat/completions`, { method: "POST", headers, body: JSON.stringify(body), signal });
      if (!res.ok || res.body === null) {
        const text = await res.text();
        let message = text;
        try { message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text; } catch { /* not JSON */ }
        throw new Error(`${res.status}: ${message}`);
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        const events = buffer.split("\n\n");
        buffer = events.pop()!;
        for (const event of events) {
          const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("");
          if (data === "" || data === "[DONE]") continue;
          const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string | null; reasoning?: string | null; reasoning_content?: string | null } }[]; error?: { message?: string } };
          if (chunk.error) throw new Error(chunk.error.message ?? "stream error");
          const delta = chunk.choices?.[0]?.delta;
          // vLLM's delta field is `reasoning` (older servers: `reasoning_content`)
          const thought = delta?.reasoning ?? delta?.reasoning_content;
          if (thought) yield { kind: "reasoning", text: thought };
          if (delta?.content) yield { kind: "content", text: delta.content };
        }
      }
    },
    close: async () => {},
  };
}

/** No --url: the engine in this process on --model (the embedded model by default), prompted through the chat template. */
async function localBackend(run: InProcessEngineConfig, sampling: ChatSampling): Promise<ChatBackend> {
  let orch: Orchestrator;
  try {
    orch = await createEngineFrontend({ modelPath: run.model, engineArgs: run.engine });
  } catch (e) {
    throw new RuntimeFailure(e instanceof CliError ? e.message : `cannot start the engine: ${errorMessage(e)}`);
  }
  let n = 0;
  return {
    label: `${orch.modelConfig.name} (in-process)`,
    async *stream(messages, signal) {
      const prompt = orch.tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true });
      const ids = orch.tokenizer.encode(prompt, { addSpecial: false, parseSpecial: true });
      if (ids.length >= orch.maxModelLen) throw new Error(`the chat is ${ids.length} tokens, the model holds ${orch.maxModelLen}: /clear to start over`);
      const params = {
        ...DEFAULT_SAMPLING_PARAMS,
        ...(sampling.temperature === null ? {} : { temperature: sampling.temperature }),
        ...(sampling.topP === null ? {} : { topP: sampling.topP }),
        ...(sampling.topK === null ? {} : { topK: sampling.topK }),
        maxTokens: Math.min(sampling.maxTokens ?? Infinity, orch.maxModelLen - ids.length),
      };
      for await (const out of orch.generate({ requestId: `chat-${++n}`, promptTokenIds: ids, sampling: params, arrivalMs: nowMs() }, signal)) {
        for (const o of out.outputs) if (o.textDelta !== "") yield { kind: "content", text: o.textDelta };
      }
    },
    close: () => orch.shutdown(),
  };
}

const HELP = 'Type a message and press Enter. """ on a line starts and ends a multi-line message (or end a line with \\). /system TEXT sets the system prompt, /clear starts over, /history shows the chat, /bye leaves (or Ctrl-D). Ctrl-C stops an answer.';

export async function main(options: Options): Promise<number> {
  const parsed = chatConfig(options);
  if (!parsed.ok) throw new CliError(parsed.error);
  const config = parsed.value;
  const sampling = config.sampling;
  const backend = config.url !== null ? await remoteBackend(config.url, config, sampling) : await localBackend(config.local!, sampling);
  const out = (text: string): void => void process.stdout.write(text);
  let system = config.systemPrompt;
  let history: ChatMessage[] = [];
  out(`fennec chat with ${backend.label}\n${HELP}\n`);

  const rl: Interface = createInterface({ input: process.stdin, output: process.stdout, terminal: process.stdin.isTTY === true, historySize: 1000 });
  let generating: AbortController | null = null;
  let closed = false;
  rl.on("SIGINT", () => {
    if (generating !== null) {
      generating.abort();
      return;
    }
    // at the prompt: drop what was typed, as a shell does
    rl.write(null, { ctrl: true, name: "u" });
    out("\n(Ctrl-D or /bye to leave)\n");
    rl.prompt();
  });
  // piped input (no TTY): Ctrl-C arrives as a signal
  process.on("SIGINT", () => {
    if (generating !== null) generating.abort();
    else rl.close();
  });
  rl.on("close", () => { closed = true; });

  const lines: AsyncIterator<string> = rl[Symbol.asyncIterator]();
  // piped input closes the interface once stdin ends, with its lines still queued in the iterator: read them all
  const nextLine = async (prompt: string): Promise<string | null> => {
    if (!closed) {
      rl.setPrompt(prompt);
      rl.prompt();
    }
    const r = await lines.next();
    return r.done === true ? null : r.value;
  };

  for (;;) {
    let line = await nextLine(">>> ");
    if (line === null) break;
    // multi-line: a """ block, or lines ending in a backslash
    if (line.trim() === '"""' || (line.trimStart().startsWith('"""') && !line.trimEnd().endsWith('"""'))) {
      const parts = [line.trimStart().slice(3)];
      for (;;) {
        const more = await nextLine("... ");
        if (more === null) break;
        if (more.trimEnd().endsWith('"""')) { parts.push(more.trimEnd().slice(0, -3)); break; }
        parts.push(more);
      }
      line = parts.join("\n").replace(/^\n/, "");
    } else {
      while (line.endsWith("\\")) {
        const more = await nextLine("... ");
        line = `${line.slice(0, -1)}\n${more ?? ""}`;
        if (more === null) break;
      }
    }
    const text = line.trim();
    if (text === "") continue;
    if (text === "/bye" || text === "/exit" || text === "/quit") break;
    if (text === "/clear") { history = []; out("(chat cleared)\n"); continue; }
    if (text === "/help" || text === "/?") { out(`${HELP}\n`); continue; }
    if (text === "/history") {
      for (const m of [...(system === null ? [] : [{ role: "system", content: system }]), ...history]) out(`${m.role}: ${String(m.content)}\n`);
      continue;
    }
    if (text === "/system" || text.startsWith("/system ")) {
      system = text.slice("/system".length).trim() || null;
      out(system === null ? "(system prompt removed)\n" : "(system prompt set)\n");
      continue;
    }
    if (text.startsWith("/")) { out(`unknown command ${text.split(/\s/)[0]} (/help lists them)\n`); continue; }

    history.push({ role: "user", content: line });
    const messages = [...(system === null ? [] : [{ role: "system", content: system }]), ...history];
    const controller = new AbortController();
    generating = controller;
    let answer = "";
    let thought = "";
    // typed-ahead lines leave a continuation prompt on the current line: the answer starts on a clean one
    if (process.stdout.isTTY) out("\r\x1b[K");
    try {
      for await (const piece of backend.stream(messages, controller.signal)) {
        // the reasoning first, between markers (as ollama run shows thinking), then the answer
        if (piece.kind === "reasoning") {
          if (thought === "") out("Thinking...\n");
          thought += piece.text;
          out(piece.text);
          continue;
        }
        if (thought !== "" && answer === "") out("\n...done thinking.\n\n");
        answer += piece.text;
        out(piece.text);
      }
      if (thought !== "" && answer === "") out("\n...done thinking.\n(the answer was all reasoning: no text after it)");
      out("\n");
    } catch (e) {
      if (controller.signal.aborted) out("\n[stopped]\n");
      else out(`\n[error: ${errorMessage(e)}]\n`);
    }
    generating = null;
    if (controller.signal.aborted && answer === "" && thought === "") history.pop();
    // an all-reasoning answer still takes its turn, so the next question follows an assistant message
    else if (answer !== "" || thought !== "") history.push({ role: "assistant", content: answer });
  }
  rl.close();
  out("\n");
  await backend.close();
  return 0;
}
