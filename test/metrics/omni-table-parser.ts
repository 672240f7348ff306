/**
 * Test helper: parses `--log-stats` output back into tables and checks every format rule of the reference
 * (omni-stats-tables.md §1.3, §7): log prefix on every line, grid shape, alignment, widths, number format.
 * Throws with a precise message on the first violation.
 */
export interface ParsedTable {
  readonly title: string;
  readonly headers: readonly string[];
  /** field -> column header -> printed cell */
  readonly rows: ReadonlyMap<string, ReadonlyMap<string, string>>;
  readonly rowOrder: readonly string[];
}

const PREFIX = /^(\(APIServer pid=\d+\) )?INFO \d\d-\d\d \d\d:\d\d:\d\d \[stats\.py:(500|526|579|619)\] /;
export const INT_CELL = /^-?\d{1,3}(,\d{3})*$/;
export const FLOAT_CELL = /^-?\d{1,3}(,\d{3})*\.\d{3}$/;

function fail(message: string): never {
  throw new Error(`table format: ${message}`);
}

/** Parses all records in `text` (other lines, e.g. progress output, are ignored). */
export function parseTables(text: string): ParsedTable[] {
  const lines = text.split(/\r?\n/).filter((l) => PREFIX.test(l)).map((l) => l.replace(PREFIX, ""));
  const tables: ParsedTable[] = [];
  let i = 0;
  while (i < lines.length) {
    if (lines[i] === "") { i++; continue; }
    const titleLine = lines[i]!;
    const title = /^\[(.*)\]$/.exec(titleLine)?.[1] ?? fail(`expected a [title], got "${titleLine}"`);
    const rule = lines[i + 1] ?? fail(`no grid after ${titleLine}`);
    if (!/^\+(-+\+)+$/.test(rule)) fail(`bad top rule "${rule}"`);
    const widths = rule.split("+").slice(1, -1).map((s) => s.length - 2);
    const cellsOf = (line: string): string[] => {
      if (line.length !== rule.length || !line.startsWith("|") || !line.endsWith("|")) fail(`row width/borders differ from the rule: "${line}"`);
      const cells: string[] = [];
      let pos = 1;
      for (const w of widths) {
        const cell = line.slice(pos, pos + w + 2);
        if (cell[0] !== " " || cell[cell.length - 1] !== " ") fail(`cell without 1-space padding in "${line}"`);
        cells.push(cell.slice(1, -1));
        if (line[pos + w + 2] !== "|") fail(`missing column separator in "${line}"`);
        pos += w + 3;
      }
      return cells;
    };
    const headerCells = cellsOf(lines[i + 2] ?? "");
    if (lines[i + 3] !== rule) fail(`no rule under the header of ${title}`);
    if (!headerCells[0]!.startsWith("Field") || headerCells[0] !== "Field".padEnd(widths[0]!)) fail(`"Field" header must be left-aligned in ${title}`);
    headerCells.slice(1).forEach((h) => { if (h !== h.trim().padStart(h.length)) fail(`value header not right-aligned in ${title}`); });
    const headers = headerCells.map((h) => h.trim());
    const rows = new Map<string, Map<string, string>>();
    const rowOrder: string[] = [];
    let j = i + 4;
    for (; lines[j] !== rule; j++) {
      if (j >= lines.length) fail(`no bottom rule for ${title}`);
      const cells = cellsOf(lines[j]!);
      if (cells[0] !== cells[0]!.trimEnd().padEnd(cells[0]!.length)) fail(`field not left-aligned in ${title}`);
      const field = cells[0]!.trim();
      const row = new Map<string, string>();
      cells.slice(1).forEach((c, k) => {
        if (c !== c.trim().padStart(c.length)) fail(`value "${c}" not right-aligned in ${title}/${field}`);
        row.set(headers[k + 1]!, c.trim());
      });
      rows.set(field, row);
      rowOrder.push(field);
    }
    // width = the longest of header and cells: some line of each column fills it exactly
    widths.forEach((w, c) => {
      const longest = Math.max(headers[c]!.length, ...[...rows.entries()].map(([f, r]) => (c === 0 ? f : r.get(headers[c]!) ?? "").length));
      if (longest !== w) fail(`column ${c} of ${title} is ${w} wide, longest content is ${longest}`);
    });
    tables.push({ title, headers, rows, rowOrder });
    i = j + 1;
  }
  return tables;
}

/** The number a printed cell holds; checks the int/float format the field must have. */
export function cellNumber(cell: string | undefined, kind: "int" | "float"): number {
  if (cell === undefined) fail("missing cell");
  if (!(kind === "int" ? INT_CELL : FLOAT_CELL).test(cell)) fail(`"${cell}" is not a ${kind} cell`);
  return Number(cell.replaceAll(",", ""));
}
