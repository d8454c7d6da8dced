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
