/**
 * A local stand-in for the Hugging Face Hub (the real one cannot be reached from here): the two endpoints fennec
 * calls, answering as huggingface.co does (checked against huggingface_hub's hf_api.model_info / file_download.py):
 *   GET /api/models/{repo}/revision/{rev}?blobs=true  {"sha", "siblings": [{"rfilename", "size", "lfs": {"sha256", "size"}}]}
 *   GET /{repo}/resolve/{rev}/{path}                  302 to the LFS store with X-Repo-Commit / X-Linked-Etag / X-Linked-Size
 *   GET /lfs/{sha256}                                 the bytes; `Range: bytes=N-` answered 206 with Content-Range
 * Errors carry X-Error-Code as the Hub's do (RepoNotFound 401, RevisionNotFound / EntryNotFound 404). Faults for
 * tests: cut the connection after N bytes of the next download, or serve one corrupted byte.
 * @example const hub = await startHubStandIn({ "org/m-GGUF": { files: { "m-Q8_0.gguf": bytes } } }); hub.url
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface StandInRepo {
  readonly files: Readonly<Record<string, Uint8Array>>;
  /** default: a hash of the repo name */
  readonly commit?: string;
}

export interface StandInFaults {
  /** the next LFS download is cut after this many bytes (then the fault clears itself) */
  cutNextDownloadAfter: number | null;
  /** LFS downloads flip one byte in the middle */
  corrupt: boolean;
  /** when set, every request must carry `Authorization: Bearer <token>`, else 401 as a gated repo */
  requiredToken: string | null;
}

export interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly range: string | null;
  readonly authorization: string | null;
}

export interface HubStandIn {
  readonly url: string;
  readonly requests: SeenRequest[];
  readonly faults: StandInFaults;
  commitOf(repo: string): string;
  close(): Promise<void>;
}

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");
const sha1 = (text: string): string => createHash("sha1").update(text).digest("hex");

export async function startHubStandIn(repos: Readonly<Record<string, StandInRepo>>): Promise<HubStandIn> {
  const requests: SeenRequest[] = [];
  const faults: StandInFaults = { cutNextDownloadAfter: null, corrupt: false, requiredToken: null };
  const commitOf = (repo: string): string => repos[repo]?.commit ?? sha1(repo);
  const blobs = new Map<string, Uint8Array>();
  for (const repo of Object.values(repos)) for (const bytes of Object.values(repo.files)) blobs.set(sha256(bytes), bytes);

  const fail = (res: ServerResponse, status: number, code: string, message: string): void => {
    res.writeHead(status, { "content-type": "application/json", "x-error-code": code, "x-error-message": message });
    res.end(JSON.stringify({ error: message }));
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? "/", "http://stand-in");
    requests.push({ method: req.method ?? "GET", path: url.pathname, range: req.headers.range ?? null, authorization: req.headers.authorization ?? null });
    if (faults.requiredToken !== null && req.headers.authorization !== `Bearer ${faults.requiredToken}`) {
      return fail(res, 401, "GatedRepo", "Access to this model is restricted. You must be authenticated to access it.");
    }
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    if (api !== null) {
      const [, repo, revision] = api as unknown as [string, string, string];
      const found = repos[repo];
      if (found === undefined) return fail(res, 401, "RepoNotFound", "Repository Not Found");
      if (revision !== "main" && revision !== commitOf(repo)) return fail(res, 404, "RevisionNotFound", `Invalid rev id: ${revision}`);
      const siblings = Object.entries(found.files).map(([rfilename, bytes]) => ({
        rfilename, size: bytes.byteLength, blobId: sha1(rfilename), lfs: { sha256: sha256(bytes), size: bytes.byteLength, pointerSize: 134 },
      }));
      res.writeHead(200, { "content-type": "application/json" });
      return void res.end(JSON.stringify({ id: repo, modelId: repo, sha: commitOf(repo), siblings }));
    }
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    if (resolve !== null) {
      const [, repo, revision, path] = resolve as unknown as [string, string, string, string];
      const found = repos[repo];
      if (found === undefined) return fail(res, 401, "RepoNotFound", "Repository Not Found");
      if (revision !== "main" && revision !== commitOf(repo)) return fail(res, 404, "RevisionNotFound", `Invalid rev id: ${revision}`);
      const bytes = found.files[decodeURIComponent(path)];
      if (bytes === undefined) return fail(res, 404, "EntryNotFound", `${path} does not exist on "${revision}"`);
      const hash = sha256(bytes);
      res.writeHead(302, { location: `/lfs/${hash}`, "x-repo-commit": commitOf(repo), "x-linked-etag": `"${hash}"`, "x-linked-size": String(bytes.byteLength) });
      return void res.end();
    }
    const lfs = /^\/lfs\/([0-9a-f]{64})$/.exec(url.pathname);
    const stored = lfs === null ? undefined : blobs.get(lfs[1]!);
    if (stored === undefined) return fail(res, 404, "EntryNotFound", "not found");
    let bytes = stored;
    if (faults.corrupt) {
      bytes = stored.slice();
      bytes[bytes.length >> 1] ^= 0xff;
    }
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    const start = range === null ? 0 : Number(range[1]);
    const body = bytes.subarray(start);
    res.writeHead(range === null ? 200 : 206, {
      "content-type": "application/octet-stream", "content-length": String(body.byteLength),
      ...(range === null ? {} : { "content-range": `bytes ${start}-${bytes.byteLength - 1}/${bytes.byteLength}` }),
    });
    const cut = faults.cutNextDownloadAfter;
    if (cut !== null && cut < body.byteLength) {
      faults.cutNextDownloadAfter = null;
      res.write(body.subarray(0, cut), () => setTimeout(() => res.socket?.destroy(), 50));
      return;
    }
    res.end(body);
  };

  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    faults,
    commitOf,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}
