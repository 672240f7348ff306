/**
 * Writes docs/request-fields.md from the one table of request-field fates (src/server/openai/request-fields.ts).
 * `npx bun scripts/request-fields-doc.ts` rewrites it; test/server/request-fields.test.ts fails when it is stale.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { REQUEST_FIELDS, type FieldFate, type FieldSource, type RequestField } from "../src/server/openai/request-fields.ts";

const FATE_TEXT: Readonly<Record<FieldFate, string>> = { implemented: "implemented", alias: "alias", "no-op": "accepted, no effect", refused: "refused (400 naming it)" };
const FATES: readonly FieldFate[] = ["implemented", "alias", "no-op", "refused"];
const SOURCES: readonly FieldSource[] = ["openai", "vllm", "llama.cpp", "ollama"];

const fateOf = (f: RequestField): string => (f.fate === "alias" ? `alias of \`${f.aliasOf}\`` : FATE_TEXT[f.fate]);

/** rows per source and fate: the summary at the top of the document */
function countsTable(): string[] {
  const count = (s: FieldSource, fate: FieldFate) => REQUEST_FIELDS.filter((f) => f.source === s && f.fate === fate).length;
  return [
    `| source | ${FATES.map((f) => FATE_TEXT[f]).join(" | ")} | rows |`,
    `| --- | ${FATES.map(() => "---").join(" | ")} | --- |`,
    ...SOURCES.map((s) => `| ${s} | ${FATES.map((f) => count(s, f)).join(" | ")} | ${REQUEST_FIELDS.filter((f) => f.source === s).length} |`),
  ];
}

export function requestFieldsDoc(): string {
  const lines = [
    "# Request fields: the fate of each one",
    "",
    "Every field of vLLM's `ChatCompletionRequest`, `CompletionRequest` and `EmbeddingCompletionRequest` (`/v1/embeddings`",
    "and `/pooling`), the OpenAI fields clients send, the fields llama.cpp's server reads on its OpenAI routes and Ollama's",
    "OpenAI-compatibility extras, and what fennec does with it: implemented; an alias (read as the field named);",
    "accepted with no effect (and why that is correct); or refused with a 400 whose `param` names the field and whose",
    "message says what to use instead. A refused field passes when it holds its no-op default (`null`, `false`, `0`,",
    "an empty list or object, or the value named in the note). Nothing that changes the output is ignored. Fields in",
    "no row are ignored, as vLLM ignores unknown fields, and logged once per request as vLLM logs them (at DEBUG):",
    "`The following fields were present in the request but ignored: {'field'}`.",
    "",
    "llama.cpp's sampler fields (`repeat_penalty` ... `samplers`) switch that request to llama.cpp's sampler chain",
    "(its order and semantics, `common/sampling.cpp`); fields it does not send keep llama.cpp's defaults, and a request",
    "without any of them keeps vLLM's sampler.",
    "",
    ...countsTable(),
    "",
    "Generated from `src/server/openai/request-fields.ts` by `npx bun scripts/request-fields-doc.ts`;",
    "`test/server/request-fields.test.ts` (OpenAI and vLLM rows) and `test/server/request-fields-fates.test.ts`",
    "(llama.cpp and Ollama rows) send every row to every endpoint it names and check its fate.",
    "",
    "| field | source | endpoints | fate | what it does / why |",
    "| --- | --- | --- | --- | --- |",
    ...REQUEST_FIELDS.map((f) => `| \`${f.name}\` | ${f.source} | ${f.endpoints.join(", ")} | ${fateOf(f)} | ${f.note.replaceAll("|", "\\|")} |`),
    "",
  ];
  return lines.join("\n");
}

if (import.meta.main) writeFileSync(join(import.meta.dir, "..", "docs", "request-fields.md"), requestFieldsDoc());
