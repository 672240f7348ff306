/**
 * `fennec serve a.gguf b.gguf ...`, a folder, or a --config file's `models:` list (model-entries.ts): several models
 * behind one server. Each model is started on its first request with its own flags (the server's, with its entry's
 * over them: its own engine Worker, scheduler, KV cache, parsers, metrics recorder and app) and kept in
 * server/model-registry.ts under --max-loaded-models, --max-loaded-memory and --keep-alive (or its entry's);
 * server/model-router.ts sends each request to the model its body names. A model's served name is its entry's
 * served-model-name, else its file name without `.gguf` (the path as given is accepted too, vLLM's rule); the
 * command line's --served-model-name names the first model only. A model's LoRA adapters (--lora-modules: the command
 * line's belong to the first model, an entry's to that entry) are routed to it by name and listed with it as parent;
 * an adapter loaded at run time goes to the model it fits (lora-base-match.ts).
 */
import { statSync } from "node:fs";
import { basename } from "node:path";
import type { Options } from "../command-line/flags.ts";
import type { ServeConfig } from "../command-line/serve-config.ts";
import { FrontEndKeeper } from "../server/front-end-keeper.ts";
import { stopJsonParser } from "../server/request-body.ts";
import { releaseIdleMemory } from "../server/idle-memory.ts";
import { isEviction, ModelRegistry, type ModelSpec } from "../server/model-registry.ts";
import { createModelRouter, keepAliveMs, type ModelApp, type RoutedAdapter, type RuntimeLora } from "../server/model-router.ts";
import { loraFits } from "./lora-base-match.ts";
import { modelArgumentFlags } from "../command-line/model-argument-flags.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { fetchModelArgument, isHubArgument } from "./model-argument.ts";
import { errorMessage } from "../util/error-message.ts";
import type { ModelEntry } from "./model-entries.ts";

/** Requests that may wait for one model's load before the 503 (Ollama's OLLAMA_MAX_QUEUE). */
const MAX_WAITING_PER_MODEL = 512;

/**
 * ms between the last unload and the collection of what it left: a collection in the same turn finds the dropped front
 * end still held (by this call's frames and the last request's objects) and frees little; 100 ms later a front end of
 * a 150k-token vocabulary (~40 MiB) is gone in one collection (measured)
 */
const IDLE_COLLECT_DELAY_MS = 100;

/** What serve needs of one started model (serve.ts builds it). */
export interface StartedModel {
  readonly app: { handle(request: Request): Promise<Response> };
  readonly orchestrator: { readonly maxModelLen: number; isHealthy(): boolean; shutdown(): Promise<void> };
  readonly recorder: { readonly registry: { metrics(): Promise<string> } };
  readonly statLogger: { start(): void; stop(): void } | null;
  /** stops and starts the model's engine alone (its Worker: weights, KV cache); the front end stays */
  readonly engine: { stop(): Promise<void>; start(): Promise<void> };
  /** lets go of what the front end holds outside the heap (its vision encoder's thread), the engine stopped already */
  dispose(): void;
  /** its LoRA adapters (--enable-lora): a rebuilt front end loads the runtime-loaded ones again */
  readonly lora: { load(body: Record<string, unknown>): Promise<string> } | null;
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

/** One model of the server with its checked config (its entry's flags over the server's). */
export interface ConfiguredModel {
  readonly entry: ModelEntry;
  readonly config: ServeConfig;
}

/** Ollama's keep_alive text in ms; a bad one is a bad command line. */
function keepAliveOf(value: unknown, where: string): number {
  const ms = keepAliveMs(value);
  if (ms === null) throw new CliError(`${where} ${String(value)}: give seconds or a duration such as 5m, 1h30m or -1`);
  return ms;
}

/** Each model's --lora-modules by adapter name; a name that is also a model's, or another model's adapter, is a bad
 * command line (a request's `model` must name one thing). */
function routedAdapters(models: readonly ConfiguredModel[], specs: readonly { name: string; aliases?: readonly string[] }[]): Map<string, RoutedAdapter> {
  const modelNames = new Set(specs.flatMap((s) => [s.name, ...(s.aliases ?? [])]));
  const adapters = new Map<string, RoutedAdapter>();
  models.forEach(({ config }, i) => {
    const model = specs[i]!.name;
    for (const m of config.engine.lora?.modules ?? []) {
      if (modelNames.has(m.name)) throw new CliError(`--lora-modules ${m.name}: that name is a served model's; give the adapter another name`);
      const other = adapters.get(m.name);
      if (other !== undefined) throw new CliError(`--lora-modules ${m.name}: the models ${other.model} and ${model} both have an adapter of that name`);
      adapters.set(m.name, { model, parent: m.baseModelName ?? model, path: m.path });
    }
  });
  return adapters;
}

/**
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING true ("true" or "1", vllm/envs.py) and LoRA on for a model: runtime loads go to the
 * model an adapter fits (lora-base-match.ts); the embedded model and Hub names not fetched yet are no candidates
 */
function runtimeLoraOf(models: readonly ConfiguredModel[], specs: readonly { name: string }[]): RuntimeLora | null {
  if (!["true", "1"].includes((process.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] ?? "").toLowerCase())) return null;
  const candidates = models.flatMap(({ entry, config }, i) => {
    const lora = config.engine.lora ?? null;
    return lora === null || entry.path === null || isHubArgument(entry.path) ? [] : [{ name: specs[i]!.name, path: entry.path, maxLoraRank: lora.maxLoraRank }];
  });
  if (candidates.length === 0) return null;
  return {
    models: candidates.map((c) => c.name),
    fits: (path) => {
      const fit = loraFits(path, candidates);
      return fit.ok ? fit.value : fit.error;
    },
  };
}

export function startSeveralModels(
  models: readonly ConfiguredModel[], options: Options,
  start: (config: ServeConfig) => Promise<StartedModel>, log: (line: string) => void,
  serverMetrics: () => Promise<string>,
): SeveralModels {
  const keepAlive = keepAliveOf(options["keep-alive"] ?? "5m", "--keep-alive");
  // the command line's first model was fetched by the CLI already; any other Hugging Face name on its first load
  const resolved = typeof options["model"] === "string" ? options["model"] : null;
  const maxLoaded = typeof options["max-loaded-models"] === "number" ? options["max-loaded-models"] : null;
  // at most as many kept front ends as models may be loaded: enough for the models taking turns under the budget
  const keeper = new FrontEndKeeper(maxLoaded !== null && maxLoaded > 0 ? maxLoaded : models.length);
  const allUnloaded = (): boolean => registry.list().every((m) => m.state === "unloaded" && m.inUse === 0);
  const collectIdle = (): void => {
    if (!allUnloaded()) return;
    keeper.releaseAll();
    stopJsonParser();
    releaseIdleMemory();
  };
  const specs: ModelSpec<ModelApp>[] = models.map(({ entry, config }, index) => {
    const path = entry.path;
    const name = config.server.servedModelName ?? (path === null ? "stories260K" : servedName(path));
    const aliases = [...config.server.servedModelAliases, ...(path !== null && path !== name ? [path] : [])].filter((a) => a !== name);
    const fromHub = path !== null && !(index === 0 && path === resolved) && isHubArgument(path);
    const modelConfig: ServeConfig = { ...config, server: { ...config.server, servedModelName: name, servedModelAliases: aliases } };
    let shell: StartedModel | null = null;
    // drops the front end: its tables go with the next collection, its vision encoder's thread at once
    const release = (): void => {
      const dropped = shell;
      shell = null;
      dropped?.dispose();
    };
    const ownKeepAlive = entry.own.includes("keep-alive") ? keepAliveOf(entry.options["keep-alive"], `models[${index}] keep-alive`) : undefined;
    return {
      name, aliases, source: path ?? "embedded:stories260K", estimatedBytes: path === null || fromHub ? 0 : fileBytes(path),
      ...(ownKeepAlive !== undefined ? { keepAliveMs: ownKeepAlive } : {}),
      // the model's front end (its routes, tokenizer, parsers and metrics) is built on its first load. An unload stops
      // its engine Worker, which holds the weights and the KV cache; a model evicted to make room for another keeps
      // its front end (front-end-keeper.ts), so its next load starts only that Worker: building a front end runs on
      // the main thread (the routes' compiled validators, the metric series, the tokenizer), which would stall
      // /health and the other models' streams while models take turns. Any other unload releases it (memory)
      load: async (): Promise<ModelApp> => {
        keeper.take(name);
        if (shell === null) {
          const local = fromHub ? (await fetchModelArgument(path, modelArgumentFlags(options))).path : path;
          shell = await start({ ...modelConfig, model: local });
          await reloadRuntimeAdapters(name, shell);
        } else {
          await shell.engine.start();
        }
        const started = shell;
        started.statLogger?.start();
        return {
          handle: (request) => started.app.handle(request),
          isHealthy: () => started.orchestrator.isHealthy(),
          metricsText: () => started.recorder.registry.metrics(),
          maxModelLen: started.orchestrator.maxModelLen,
          shutdown: async (reason) => {
            started.statLogger?.stop();
            await started.engine.stop();
            if (reason !== undefined && isEviction(reason)) {
              keeper.keep(name, release);
            } else {
              release();
            }
            // the last model gone: release the kept front ends and give back what the loads left (idle-memory.ts: the
            // compiled code and the heap's capacity, in a full synchronous collection: no model runs to be stalled by
            // it), so the process's memory comes back while the server is idle; the body parser's thread goes too (a
            // request restarts it)
            if (allUnloaded()) setTimeout(collectIdle, IDLE_COLLECT_DELAY_MS).unref?.();
          },
        };
      },
    };
  });
  let registry: ModelRegistry<ModelApp>;
  try {
    registry = new ModelRegistry(specs, {
      maxLoadedModels: maxLoaded,
      maxMemoryBytes: typeof options["max-loaded-memory"] === "number" ? options["max-loaded-memory"] : null,
      defaultKeepAliveMs: keepAlive, maxWaitingPerModel: MAX_WAITING_PER_MODEL, log,
    });
  } catch (e) {
    throw new CliError(`${errorMessage(e)}: give each model its own file name or served-model-name`);
  }
  // the adapters loaded through POST /v1/load_lora_adapter live in the router's map; a model whose front end was
  // released (an idle unload) loads its own again when it is built anew
  async function reloadRuntimeAdapters(model: string, started: StartedModel): Promise<void> {
    for (const [name, a] of adapters) {
      if (a.runtime !== true || a.model !== model) continue;
      try {
        await started.lora?.load({ lora_name: name, lora_path: a.path });
      } catch (e) {
        adapters.delete(name);
        log(`LoRA adapter ${name} could not be loaded again for model ${model}: ${errorMessage(e)}`);
      }
    }
  }
  const adapters = routedAdapters(models, specs);
  const runtimeLora = runtimeLoraOf(models, specs);
  const handle = createModelRouter(registry, { apiKeys: models[0]!.config.server.apiKeys, log, serverMetrics, adapters, ...(runtimeLora !== null ? { runtimeLora } : {}) });
  return {
    names: specs.map((s) => s.name), registry, handle,
    isHealthy: () => true, deathReason: () => null,
    shutdown: () => registry.shutdown(),
  };
}
