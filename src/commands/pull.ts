/**
 * `fennec pull org/repo[:QUANT]`: fetches a model into the Hugging Face cache as `serve` would, without serving it,
 * and prints the cached file's path on stdout (so `fennec serve "$(fennec pull x/y)"` works), like `ollama pull` /
 * `hf download`.
 */
import type { Options } from "../command-line/flags.ts";
import { pullConfig } from "../command-line/pull-config.ts";
import { CliError } from "../util/cli-error.ts";
import { fetchModelArgument, isHubArgument } from "./model-argument.ts";

export async function main(options: Options): Promise<number> {
  const config = pullConfig(options);
  const model = config.model;
  if (model === null) throw new CliError("pull needs a model: fennec pull org/repo[:QUANT] (or hf://org/repo/file.gguf)");
  if (!isHubArgument(model)) throw new CliError(`pull fetches Hugging Face models, but ${model} is a local path: serve it directly`);
  const fetched = await fetchModelArgument(model, config);
  process.stdout.write(`${fetched.path}\n`);
  return 0;
}
