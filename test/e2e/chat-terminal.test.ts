// `fennec chat` driven in a real pseudo-terminal (tmux send-keys / capture-pane) as a person types: against a real
// fennec server (--url) a long answer streams and Ctrl-C stops it without leaving (the server sees the request end),
// the chat goes on, /system and /history work, /bye leaves with 0; on the in-process engine (embedded model) a full
// answer, a """ multi-line message, /clear and Ctrl-D.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { makeModelFile } from "../helpers/random-gguf.ts";
import { serverCommand, startServer, type ServerProcess } from "./server-process.ts";

const ROOT = join(import.meta.dir, "..", "..");
let server: ServerProcess;
const sessions: string[] = [];

beforeAll(async () => {
  if (Bun.spawnSync(["tmux", "-V"]).exitCode !== 0) throw new Error("tmux is missing: run scripts/install-test-deps.sh (apt-get install tmux)");
  // random weights in SmolLM2's shape, one layer: a few ms a token, so an answer of thousands of tokens takes seconds
  server = await startServer(["--model", await makeModelFile("smollm2-135m", "q8_0", 1)]);
}, 120_000);

afterAll(async () => {
  for (const s of sessions) Bun.spawnSync(["tmux", "kill-session", "-t", s]);
  await server?.stop();
});

const quote = (a: string): string => `'${a.replaceAll("'", "'\\''")}'`;

/** A tmux session running `fennec chat ARGS`; the pane stays after exit and shows EXITED <code>. */
function startChat(args: readonly string[]): { keys(...keys: string[]): void; screen(): string; waitFor(pred: (s: string) => boolean, what: string, ms?: number): Promise<string> } {
  const name = `fennec-chat-${process.pid}-${sessions.length}`;
  sessions.push(name);
  const cmd = [...serverCommand().slice(0, -1), "chat", ...args].map(quote).join(" ");
  const r = Bun.spawnSync(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", ROOT, `${cmd}; echo EXITED $?; sleep 120`]);
  if (r.exitCode !== 0) throw new Error(`tmux: ${r.stderr.toString()}`);
  const screen = (): string => Bun.spawnSync(["tmux", "capture-pane", "-p", "-J", "-S", "-500", "-t", name]).stdout.toString();
  return {
    keys: (...keys) => void Bun.spawnSync(["tmux", "send-keys", "-t", name, ...keys]),
    screen,
    async waitFor(pred, what, ms = 30_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const s = screen();
        if (pred(s)) return s;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; the screen:\n${s}`);
        await Bun.sleep(100);
      }
    },
  };
}

const running = async (): Promise<number> => {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith("vllm:num_requests_running{")).reduce((s, l) => s + Number(l.split(" ").pop()), 0);
};
const prompts = (s: string): number => s.split("\n").filter((l) => l.startsWith(">>> ")).length;

test("fennec chat --url: streams, Ctrl-C stops an answer and the chat goes on, /system, /history, /bye", async () => {
  const chat = startChat(["--url", `${server.url}/v1`, "--max-tokens", "4000"]);
  await chat.waitFor((s) => s.includes(">>> "), "the prompt");
  chat.keys("Tell me a very long story", "Enter");
  // streamed: the answer line grows while the server still runs the request
  const first = await chat.waitFor((s) => (s.split("Tell me a very long story\n")[1] ?? "").trim().length > 20, "the answer to start");
  const grown = await chat.waitFor((s) => s.length > first.length + 20, "more tokens");
  expect(grown.includes("[stopped]")).toBe(false);
  expect(await running()).toBe(1);
  chat.keys("C-c");
  const stopped = await chat.waitFor((s) => s.includes("[stopped]") && prompts(s.split("[stopped]")[1]!) === 1, "[stopped] and a new prompt");
  expect(stopped).not.toContain("EXITED");
  for (let i = 0; i < 50 && (await running()) !== 0; i++) await Bun.sleep(100);
  expect(await running()).toBe(0);

  // the chat goes on: a system prompt, a second message (stopped too), and the history holds both turns
  chat.keys("/system You answer briefly.", "Enter");
  await chat.waitFor((s) => s.includes("(system prompt set)"), "/system");
  chat.keys("And then?", "Enter");
  await chat.waitFor((s) => (s.split("And then?\n")[1] ?? "").trim().length > 10, "the second answer");
  chat.keys("C-c");
  await chat.waitFor((s) => s.split("[stopped]").length === 3, "the second [stopped]");
  chat.keys("/history", "Enter");
  const history = await chat.waitFor((s) => s.includes("user: And then?"), "/history");
  const shown = history.slice(history.lastIndexOf(">>> /history"));
  expect(shown).toContain("system: You answer briefly.");
  expect(shown).toContain("user: Tell me a very long story\nassistant: ");
  chat.keys("/bye", "Enter");
  await chat.waitFor((s) => s.includes("EXITED 0"), "exit 0");
}, 120_000);

test("fennec chat in-process: a full answer, a multi-line message, /clear, Ctrl-D", async () => {
  const chat = startChat(["--max-tokens", "12", "--temperature", "0"]);
  await chat.waitFor((s) => s.includes("fennec chat with stories260K (in-process)") && s.includes(">>> "), "the prompt");
  chat.keys("Once upon a time", "Enter");
  const answered = await chat.waitFor((s) => prompts(s) === 2, "the answer");
  const answer = answered.split("Once upon a time\n")[1]!.split("\n>>> ")[0]!.trim();
  expect(answer.split(/\s+/).length).toBeGreaterThan(3);
  chat.keys('"""', "Enter", "Lily had a dog.", "Enter", 'The dog was big."""', "Enter");
  await chat.waitFor((s) => prompts(s) === 3, "the multi-line answer");
  chat.keys("/history", "Enter");
  await chat.waitFor((s) => s.includes("user: Lily had a dog.\nThe dog was big."), "the multi-line message in /history");
  chat.keys("/clear", "Enter");
  await chat.waitFor((s) => s.includes("(chat cleared)"), "/clear");
  chat.keys("/history", "Enter");
  const cleared = await chat.waitFor((s) => /\(chat cleared\)\n>>> \/history\n>>> /.test(s), "the empty history");
  expect(cleared.split("(chat cleared)")[1]!).not.toContain("user:");
  chat.keys("C-d");
  await chat.waitFor((s) => s.includes("EXITED 0"), "Ctrl-D to leave");
}, 120_000);
