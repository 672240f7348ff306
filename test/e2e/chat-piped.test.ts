// `fennec chat --url` with its input piped (printf 'a\nb\n' | fennec chat --url ...): every line is one question and
// gets its answer, and an answer that is all reasoning shows that reasoning instead of an empty line. The server is a
// small OpenAI-style stub that streams what each test needs (a reasoning-only answer is hard to get from a real model
// on demand); the chat is the real binary.
import { afterAll, expect, test } from "bun:test";
import { join } from "node:path";
import { serverCommand } from "./server-process.ts";

const ROOT = join(import.meta.dir, "..", "..");
const seen: string[][] = [];

/** Streams one chunk per delta, as vLLM's chat completions stream does. */
function sse(deltas: readonly Record<string, string>[]): Response {
  const body = [...deltas.map((d) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: d }] })}\n\n`), "data: [DONE]\n\n"].join("");
  return new Response(body, { headers: { "content-type": "text/event-stream" } });
}

const stub = Bun.serve({
  hostname: "127.0.0.1", port: 0,
  async fetch(req) {
    const url = new URL(req.url);
    if (url.pathname === "/v1/models") return Response.json({ object: "list", data: [{ id: "stub", object: "model" }] });
    const body = (await req.json()) as { messages: { role: string; content: string }[] };
    seen.push(body.messages.map((m) => `${m.role}:${m.content}`));
    const last = body.messages.at(-1)!.content;
    if (last === "think only") return sse([{ role: "assistant" }, { reasoning: "Let me weigh " }, { reasoning: "the options." }]);
    return sse([{ role: "assistant" }, { content: `echo ${last}` }]);
  },
});
afterAll(() => stub.stop(true));

async function chatWithInput(input: string): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn([...serverCommand().slice(0, -1), "chat", "--url", `http://127.0.0.1:${stub.port}/v1`], { cwd: ROOT, stdin: new TextEncoder().encode(input), stdout: "pipe", stderr: "pipe" });
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  return { code, out };
}

test("piped input: every line is asked in turn, with the earlier turns as history", async () => {
  seen.length = 0;
  const { code, out } = await chatWithInput("a\nb\nc\n");
  expect(code).toBe(0);
  expect(out).toContain("echo a");
  expect(out).toContain("echo b");
  expect(out).toContain("echo c");
  expect(seen).toEqual([["user:a"], ["user:a", "assistant:echo a", "user:b"], ["user:a", "assistant:echo a", "user:b", "assistant:echo b", "user:c"]]);
}, 60_000);

test("an answer that is all reasoning prints the reasoning, not an empty line", async () => {
  seen.length = 0;
  const { code, out } = await chatWithInput("think only\nafter\n");
  expect(code).toBe(0);
  expect(out).toContain("Thinking...\nLet me weigh the options.\n...done thinking.");
  expect(out).toContain("echo after");
  // the reasoning-only turn is kept, so the next question follows an assistant message
  expect(seen[1]).toEqual(["user:think only", "assistant:", "user:after"]);
}, 60_000);
