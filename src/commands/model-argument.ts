/**
 * The model argument of every command, made a local path before the command runs: a file on disk stays as it is; a
 * Hugging Face reference (org/repo[:QUANT], hf://org/repo/file.gguf) is fetched into the Hub cache and replaced by the
 * cached file's path. `serve`'s default served name stays the argument as given, as vLLM's served_model_name
 * defaults to `model`.
 * @example const options = await resolveModelArgument("serve", parsed); // options.model is a local path now
 */
import { existsSync } from "node:fs";
import type { Command, Options } from "../command-line/flags.ts";
import { modelArgumentFlags, withLocalModel, type ModelArgumentFlags } from "../command-line/model-argument-flags.ts";
import { fetchHubModel, type FetchedModel } from "../hub/fetch-model.ts";
import { HubError } from "../hub/hub-client.ts";
import { hubSettings } from "../hub/hub-settings.ts";
import { looksLikeHubReference, parseModelReference } from "../hub/model-reference.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";
import { createLogger, parseLogLevel } from "../util/logger.ts";
import { createProgressBar } from "../util/progress.ts";

type Env = Readonly<Record<string, string | undefined>>;

/** a GGUF file name or a path is never a repository, even when the file is missing (its error is "file not found") */
export function isHubArgument(model: string): boolean {
  if (model.startsWith("hf://")) return true;
  return !existsSync(model) && !/\.gguf$/i.test(model) && looksLikeHubReference(model);
}

/** Fetches `model` (a Hub reference) into the cache; one log line per event on stderr, a progress bar on a terminal. */
export async function fetchModelArgument(model: string, flags: ModelArgumentFlags, env: Env = process.env): Promise<FetchedModel> {
  const ref = parseModelReference(model);
  if (!ref.ok) throw new CliError(ref.error);
  const base = hubSettings(env, flags.downloadDir);
  const settings = flags.hfToken !== null ? { ...base, token: flags.hfToken } : base;
  const log = createLogger({
    level: parseLogLevel(env["VLLM_LOGGING_LEVEL"] ?? "") ?? "INFO",
    format: flags.logFormat,
    write: (line) => process.stderr.write(line),
  }).child("hub");
  try {
    return await fetchHubModel(ref.value, {
      revision: flags.revision ?? "main",
      settings,
      log: (line) => log.info(line),
      progressBar: (label) => createProgressBar(label, { minTotal: 1 }),
    });
  } catch (e) {
    if (e instanceof HubError) throw new RuntimeFailure(e.message);
    throw e;
  }
}

export async function resolveModelArgument(command: Command, options: Options, env: Env = process.env): Promise<Options> {
  const flags = modelArgumentFlags(options);
  const model = flags.model;
  if (model === null) {
    if (flags.revision !== null) throw new CliError(`--revision applies to a Hugging Face model, but no model is given (the embedded default model is served): drop --revision`);
    return options;
  }
  if (!isHubArgument(model)) {
    if (flags.revision !== null) throw new CliError(`--revision applies to a Hugging Face model, but ${model} is a local file: drop --revision`);
    return options;
  }
  const fetched = await fetchModelArgument(model, flags, env);
  return withLocalModel(command, options, fetched.path, model);
}
