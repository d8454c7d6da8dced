// Aligned plain-text tables for CLI output. Cells must already be safe to print (quote anything
// untrusted with quoteUntrusted first); the last column is not padded.

export function formatTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const formatRow = (cells: readonly string[]) =>
    cells
      .map((cell, column) =>
        column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? cell.length),
      )
      .join("  ")
      .trimEnd();
  return [formatRow(headers), ...rows.map(formatRow)].join("\n");
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
  if (options.json) out(JSON.stringify(options.value));
  else if (options.rows.length === 0) out(options.empty);
  else out(formatTable(options.headers, options.rows));
}
