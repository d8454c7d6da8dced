// Aligned plain-text tables for CLI output. Every header and cell is escaped for the terminal
// (src/cli/terminal-text.ts), newlines included, so no cell can move the cursor or start a row of
// its own; the last column is not padded.
import { escapeForTerminal, toTerminalJson } from "./terminal-text.ts";

export function formatTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const safeHeaders = headers.map((h) => escapeForTerminal(h));
  const safeRows = rows.map((row) => row.map((cell) => escapeForTerminal(cell)));
  const widths = safeHeaders.map((header, column) =>
    Math.max(header.length, ...safeRows.map((row) => (row[column] ?? "").length)),
  );
  const formatRow = (cells: readonly string[]) =>
    cells
      .map((cell, column) =>
        column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? cell.length),
      )
      .join("  ")
      .trimEnd();
  return [formatRow(safeHeaders), ...safeRows.map(formatRow)].join("\n");
}

/** A URL query from the string options named in `keys` that were given. */
export function queryFromOptions(
  values: Readonly<Record<string, unknown>>,
  keys: readonly string[],
): URLSearchParams {
  const query = new URLSearchParams();
  for (const key of keys) {
    const value = values[key];
    if (typeof value === "string") query.set(key, value);
  }
  return query;
}

/**
 * What every listing verb prints: `value` as JSON under --json; otherwise `empty` when there are
 * no rows, else the table.
 */
export function printListing(
  out: (text: string) => void,
  options: {
    json: boolean;
    value: unknown;
    headers: readonly string[];
    rows: readonly (readonly string[])[];
    empty: string;
  },
): void {
  if (options.json) out(toTerminalJson(options.value));
  else if (options.rows.length === 0) out(options.empty);
  else out(formatTable(options.headers, options.rows));
}
