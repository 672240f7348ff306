/**
 * Rewrites the table of docs/vllm-flags.md from command-line/flags.ts's FLAGS (every `serve` flag with its fate), keeping the
 * text above it. Run after adding a serve flag: `npx bun run scripts/vllm-flags-doc.ts` (test/e2e/vllm-command-lines
 * fails until the doc names every flag).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FLAGS, type FlagSpec } from "../src/command-line/flags.ts";

const DOC = join(import.meta.dir, "..", "docs", "vllm-flags.md");
const HEADER = "| flag | fate | what it does on fennec |\n|---|---|---|\n";

type Fate = "implemented" | "alias" | "inert" | "inert for some values" | "refused";
const counts: Record<Fate, number> = { implemented: 0, alias: 0, inert: 0, "inert for some values": 0, refused: 0 };

/** vLLM's other spellings of a flag: one alias row each, naming the flag they stand for */
function aliasRows(f: FlagSpec): string[] {
  const names = [...(f.vllmName ? [`--${f.vllmName}`] : []), ...(f.alias ? [f.alias] : []), ...(f.aliases ?? [])];
  counts.alias += names.length;
  return names.map((n) => `| \`${n}\` | alias | the same as \`--${f.name}\`. |`);
}

function row(f: FlagSpec): string {
  const names = `\`--${f.name}\``;
  let fate: string;
  let what: string;
  if (f.fate === undefined) { fate = "implemented"; what = f.help; counts.implemented++; }
  else if (f.fate.noop !== undefined && f.fate.accepts !== undefined) { fate = "accepted for some values, else refused"; what = `${f.help} No effect: ${f.fate.noop}. Other values: ${f.fate.refuse}.`; counts["inert for some values"]++; }
  else if (f.fate.noop !== undefined) { fate = "accepted, no effect (one log line)"; what = `${f.help.replace(/^Accepted(, no effect)?: /, "")} Logged: "${f.fate.noop}".`; counts.inert++; }
  else { fate = "refused (exit 2)"; what = `${f.fate.refuse}.`; counts.refused++; }
  return `| ${names} | ${fate} | ${what.replace(/\|/g, "\\|")} |`;
}

const text = readFileSync(DOC, "utf8");
const at = text.indexOf(HEADER);
if (at < 0) throw new Error(`${DOC}: the table header is missing`);
const rows = FLAGS.filter((f) => f.commands.includes("serve")).flatMap((f) => [row(f), ...aliasRows(f)]);
writeFileSync(DOC, `${text.slice(0, at)}${HEADER}${rows.join("\n")}\n`);
process.stdout.write(`${DOC}: ${rows.length} rows (${Object.entries(counts).map(([k, n]) => `${k} ${n}`).join(", ")})\n`);
