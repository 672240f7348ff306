/**
 * `fennec tokenize --text T [--json] [--add-special] [--model PATH]`: prints the token ids of a text, one line of
 * space-separated ids, or `{"token_ids":[...]}` with --json. No BOS unless --add-special, which also adds EOS where the
 * model does and parses special-token texts (llama.cpp add_special + parse_special). Default model: the embedded one.
 * Missing --text: one-line error, exit 2; a missing or bad model file: one line, exit 1.
 */
import { tokenizeConfig } from "../command-line/tokenize-config.ts";
import type { Options } from "../command-line/flags.ts";
import { openModelGguf } from "../gguf/model-source.ts";
import type { GgufFile } from "../gguf/gguf-file.ts";
import { createTokenizer } from "../tokenizer/gguf-tokenizer.ts";
import { TokenizerError, type Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError, RuntimeFailure } from "../util/cli-error.ts";

function loadTokenizer(file: GgufFile): Tokenizer {
  try {
    return createTokenizer(file);
  } catch (e) {
    if (e instanceof TokenizerError) throw new RuntimeFailure(e.message);
    throw e;
  }
}

export async function main(options: Options): Promise<number> {
  const config = tokenizeConfig(options);
  if (!config.ok) throw new CliError(config.error);
  const { text, addSpecial, json } = config.value;
  const file = await openModelGguf(config.value.model);
  if (!file.ok) throw new RuntimeFailure(file.error);
  const tokenizer = loadTokenizer(file.value);
  const tokenIds = tokenizer.encode(text, { addSpecial, parseSpecial: addSpecial });
  process.stdout.write(json ? `${JSON.stringify({ token_ids: tokenIds })}\n` : `${tokenIds.join(" ")}\n`);
  return 0;
}
