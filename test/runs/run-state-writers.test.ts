// One writer of run state: only src/runs/run-state.ts may insert, update or delete rows of `runs`
// and `tool_calls`. A second writer is how the revocation path once drifted (it left batches and
// parked calls behind); this scan fails the build before that can happen again.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "../../src");
const writer = path.join(root, "runs", "run-state.ts");

const patterns: readonly RegExp[] = [
  // drizzle: tx.update(runs), db.insert(toolCalls), .delete(runs) …
  /\.\s*(?:update|insert|delete)\s*\(\s*(?:schema\.)?(?:runs|toolCalls)\s*\)/,
  // raw SQL, in any case and spacing, quoted or not.
  /\b(?:update|insert\s+into|delete\s+from)\s+"?(?:runs|tool_calls)"?(?:\s|$|;)/i,
];

async function listSources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const files = await Promise.all(
    entries.map((e) => {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) return listSources(full);
      return Promise.resolve(e.name.endsWith(".ts") ? [full] : []);
    }),
  );
  return files.flat();
}

it("no file in src/ but src/runs/run-state.ts writes runs or tool_calls", async () => {
  const offenders: string[] = [];
  for (const file of await listSources(root)) {
    if (file === writer) continue;
    const text = await readFile(file, "utf8");
    text.split("\n").forEach((line, index) => {
      if (patterns.some((p) => p.test(line))) {
        offenders.push(`${path.relative(root, file)}:${index + 1}: ${line.trim()}`);
      }
    });
  }
  expect(offenders).toEqual([]);
});

it("the scan recognises the writes it forbids", () => {
  const writes = [
    "await tx.update(runs).set({ status: 'rejected' })",
    "db.insert(toolCalls).values(rows)",
    "await db.delete(runs)",
    "sql`update runs set status = 'x'`",
    'sql`UPDATE "tool_calls" SET status = 1`',
    "insert into runs (id) values ($1);",
  ];
  for (const line of writes)
    expect(
      patterns.some((p) => p.test(line)),
      line,
    ).toBe(true);
  const reads = ["db.select().from(runs)", "update(callers)", "// updates runs later"];
  for (const line of reads)
    expect(
      patterns.some((p) => p.test(line)),
      line,
    ).toBe(false);
  // The writer itself writes both tables, so the scan would find it.
  return readFile(writer, "utf8").then((text) => {
    expect(patterns[0]?.test(text)).toBe(true);
  });
});
