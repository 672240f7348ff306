/**
 * `fennec serve a.gguf b.gguf ...` (or --models): several models behind one server. Each model is started on its
 * first request with serve's flags (its own engine Worker, scheduler, KV cache, metrics recorder and app) and kept in
 * server/model-registry.ts under --max-loaded-models, --max-loaded-memory and --keep-alive; server/model-router.ts
 * sends each request to the model its body names. A model's served name is its file name without `.gguf` (the path as
 * given is accepted too, vLLM's rule); --served-model-name names the first model only.
 */
import { statSync } from "node:fs";
import { basename } from "node:path";
import type { Options } from "../command-line/flags.ts";
import type { ServeConfig } from "../command-line/serve-config.ts";
import { ModelRegistry, type ModelSpec } from "../server/model-registry.ts";
import { createModelRouter, keepAliveMs, type ModelApp } from "../server/model-router.ts";
import { modelArgumentFlags } from "../command-line/model-argument-flags.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { fetchModelArgument, isHubArgument } from "./model-argument.ts";
import { errorMessage } from "../util/error-message.ts";

/** Requests that may wait for one model's load before the 503 (Ollama's OLLAMA_MAX_QUEUE). */
const MAX_WAITING_PER_MODEL = 512;

/** What serve needs of one started model (serve.ts builds it). */
export interface StartedModel {
  readonly app: { handle(request: Request): Promise<Response> };
  readonly orchestrator: { readonly maxModelLen: number; isHealthy(): boolean; shutdown(): Promise<void> };
  readonly recorder: { readonly registry: { metrics(): Promise<string> } };
  readonly statLogger: { start(): void; stop(): void } | null;
}

export interface SeveralModels {
  readonly names: readonly string[];
  readonly registry: ModelRegistry<ModelApp>;
  handle(request: Request): Promise<Response>;
  /** the server lives while it listens: one model's dead engine is that model's error (it is loaded again) */
  isHealthy(): boolean;
  deathReason(): string | null;
  shutdown(): Promise<void>;
}

/** The models after the first (extra positional arguments and --models). */
export function readModelList(options: Options): string[] {
  const models = options["models"];
  return Array.isArray(models) ? [...models] : typeof models === "string" ? [models] : [];
}

/** A local file's name without .gguf; a Hugging Face name as given (vLLM's rule). */
function servedName(path: string): string {
  return isHubArgument(path) ? path : basename(path).replace(/\.gguf$/i, "");
}

/** A local model's size (the memory budget's estimate); a missing or odd file fails the start, as for one model. */
function fileBytes(path: string): number {
  let stat;
  try { stat = statSync(path); } catch { throw new RuntimeFailure(`${path}: file not found`); }
  if (!stat.isFile()) throw new RuntimeFailure(`${path}: not a regular file`);
  return stat.size;
}

export function startSeveralModels(
  config: ServeConfig, models: readonly string[], options: Options,
  start: (config: ServeConfig) => Promise<StartedModel>, log: (line: string) => void,
  serverMetrics: () => Promise<string>,
): SeveralModels {
  const keepAlive = keepAliveMs(options["keep-alive"] ?? "5m");
  if (keepAlive === null) throw new CliError(`--keep-alive ${String(options["keep-alive"])}: give seconds or a duration such as 5m, 1h30m or -1`);
  const first = config.model;
  const specs: ModelSpec<ModelApp>[] = [first, ...models].map((path, index) => {
    const name = index === 0 && config.server.servedModelName !== null ? config.server.servedModelName : path === null ? "stories260K" : servedName(path);
    const aliases = [...(index === 0 ? config.server.servedModelAliases : []), ...(path !== null && path !== name ? [path] : [])].filter((a) => a !== name);
    // the first model was fetched by the CLI already; a later Hugging Face name is fetched on its first load
    const fromHub = index > 0 && path !== null && isHubArgument(path);
    const modelConfig: ServeConfig = { ...config, model: path, server: { ...config.server, servedModelName: name, servedModelAliases: aliases } };
    return {
      name, aliases, source: path ?? "embedded:stories260K", estimatedBytes: path === null || fromHub ? 0 : fileBytes(path),
      load: async (): Promise<ModelApp> => {
        const local = fromHub ? (await fetchModelArgument(path, modelArgumentFlags(options))).path : path;
        const started = await start({ ...modelConfig, model: local });
        started.statLogger?.start();
        return {
          handle: (request) => started.app.handle(request),
          isHealthy: () => started.orchestrator.isHealthy(),
          metricsText: () => started.recorder.registry.metrics(),
          maxModelLen: started.orchestrator.maxModelLen,
          shutdown: async () => { started.statLogger?.stop(); await started.orchestrator.shutdown(); },
        };
      },
    };
  });
  let registry: ModelRegistry<ModelApp>;
  try {
    registry = new ModelRegistry(specs, {
      maxLoadedModels: typeof options["max-loaded-models"] === "number" ? options["max-loaded-models"] : null,
      maxMemoryBytes: typeof options["max-loaded-memory"] === "number" ? options["max-loaded-memory"] : null,
      defaultKeepAliveMs: keepAlive, maxWaitingPerModel: MAX_WAITING_PER_MODEL, log,
    });
  } catch (e) {
    throw new CliError(`${errorMessage(e)}: give each model its own file name`);
  }
  const handle = createModelRouter(registry, { apiKeys: config.server.apiKeys, log, serverMetrics });
  return {
    names: specs.map((s) => s.name), registry, handle,
    isHealthy: () => true, deathReason: () => null,
    shutdown: () => registry.shutdown(),
  };
}
