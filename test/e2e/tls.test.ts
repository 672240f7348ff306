/**
 * TLS as vLLM configures it (--ssl-keyfile / --ssl-certfile; --ssl-ca-certs with --ssl-cert-reqs 2 for client
 * certificates), with certificates made here by the openssl CLI (Debian's, installed by scripts/install-test-deps.sh):
 * the official openai client streams over HTTPS trusting only the test CA; plain HTTP to the port gets no answer; with
 * client certificates required, a client without one is refused and one with a certificate from the CA is served.
 * Also --uds: the same API over a Unix socket.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { serverCommand, startServer, type ServerProcess } from "./server-process.ts";

const dir = mkdtempSync(join(tmpdir(), "fennec-tls-"));
const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
  rmSync(dir, { recursive: true, force: true });
});

function openssl(...args: string[]): void {
  const run = Bun.spawnSync(["openssl", ...args], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  if (run.exitCode !== 0) throw new Error(`openssl ${args.join(" ")}: ${run.stderr.toString()}`);
}

// a CA, a server certificate for 127.0.0.1 signed by it, and a client certificate signed by it
openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=fennec test CA");
openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1");
await Bun.write(join(dir, "san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "1", "-extfile", "san.ext");
openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=fennec client");
openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "client.pem", "-days", "1");
const ca = readFileSync(join(dir, "ca.pem"), "utf8");
const TLS_ARGS = ["--ssl-keyfile", join(dir, "server.key"), "--ssl-certfile", join(dir, "server.pem")];

describe("TLS", () => {
  test("HTTPS with a self-signed CA: the openai client streams; plain HTTP gets no answer", async () => {
    const server = await startServer(TLS_ARGS, { https: true });
    servers.push(server);
    expect(server.url).toStartWith("https://");
    expect(server.log()).toContain(`on ${server.url} `);
    const client = new OpenAI({
      baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0,
      fetch: ((url: string, init: RequestInit) => fetch(url, { ...init, tls: { ca } })) as unknown as typeof fetch,
    });
    const stream = await client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Once" }], max_tokens: 8, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text.length).toBeGreaterThan(0);
    // the certificate is checked: without the CA the client refuses the server
    await expect(fetch(`${server.url}/health`)).rejects.toThrow();
    await expect(fetch(server.url.replace("https://", "http://") + "/health")).rejects.toThrow();
  }, 60_000);

  test("--ssl-ca-certs with --ssl-cert-reqs 2: a client certificate from the CA is required", async () => {
    const server = await startServer([...TLS_ARGS, "--ssl-ca-certs", join(dir, "ca.pem"), "--ssl-cert-reqs", "2"], {
      https: true, healthTls: { ca, cert: readFileSync(join(dir, "client.pem"), "utf8"), key: readFileSync(join(dir, "client.key"), "utf8") },
    });
    servers.push(server);
    await expect(fetch(`${server.url}/health`, { tls: { ca } })).rejects.toThrow();
    const res = await fetch(`${server.url}/v1/models`, { tls: { ca, cert: readFileSync(join(dir, "client.pem"), "utf8"), key: readFileSync(join(dir, "client.key"), "utf8") } });
    expect(res.status).toBe(200);
  }, 60_000);

  test("a half TLS configuration is one line, exit 2", () => {
    const run = Bun.spawnSync([...serverCommand(), "--ssl-keyfile", join(dir, "server.key"), "--port", "0"], { stdout: "pipe", stderr: "pipe" });
    expect(run.exitCode).toBe(2);
    expect(run.stderr.toString()).toBe("fennec: TLS needs both --ssl-keyfile and --ssl-certfile\n");
  });
});

describe("--uds", () => {
  test("the API over a Unix domain socket", async () => {
    const socket = join(dir, "fennec.sock");
    const child = Bun.spawn([...serverCommand(), "--uds", socket, "--threads", "1"], { stdout: "pipe", stderr: "pipe" });
    try {
      let res: Response | null = null;
      for (let i = 0; i < 300 && res === null; i++) {
        res = await fetch("http://localhost/v1/models", { unix: socket }).catch(() => null);
        if (res === null) await Bun.sleep(100);
      }
      expect(res?.status).toBe(200);
      const body = (await res!.json()) as { data: { id: string }[] };
      expect(body.data[0]!.id).toBe("stories260K");
    } finally {
      child.kill();
      await child.exited;
    }
  }, 60_000);
});
