/**
 * Writes docs/request-fields.md from the one table of request-field fates (src/server/openai/request-fields.ts).
 * `npx bun scripts/request-fields-doc.ts` rewrites it; test/server/request-fields.test.ts fails when it is stale.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { REQUEST_FIELDS } from "../src/server/openai/request-fields.ts";

const FATE_TEXT = { implemented: "implemented", "no-op": "accepted, no effect", refused: "refused (400 naming it)" } as const;

export function requestFieldsDoc(): string {
  const lines = [
    "# Request fields: the fate of each one",
    "",
    "Every field of vLLM's `ChatCompletionRequest`, `CompletionRequest` and `EmbeddingCompletionRequest` (`/v1/embeddings`",
    "and `/pooling`), plus the OpenAI and llama.cpp fields clients",
    "send, and what fennec does with it: implemented; accepted with no effect (and why that is correct); or refused with",
    "a 400 whose `param` names the field. A refused field passes when it holds its no-op default (`null`, `false`, `0`,",
    "an empty list or object, or the value named in the note). Nothing that changes the output is ignored. Fields in",
    "no row are ignored, as vLLM ignores unknown fields.",
    "",
    "Generated from `src/server/openai/request-fields.ts` by `npx bun scripts/request-fields-doc.ts`;",
    "`test/server/request-fields.test.ts` sends every row and checks its fate.",
    "",
    "| field | endpoints | fate | what it does / why |",
    "| --- | --- | --- | --- |",
    ...REQUEST_FIELDS.map((f) => `| \`${f.name}\` | ${f.endpoints.join(", ")} | ${FATE_TEXT[f.fate]} | ${f.note.replaceAll("|", "\\|")} |`),
    "",
  ];
  return lines.join("\n");
}

if (import.meta.main) writeFileSync(join(import.meta.dir, "..", "docs", "request-fields.md"), requestFieldsDoc());
