// `npm run security:report`: runs the security suite (test/security/) with vitest's JSON reporter
// and prints how many attack cases it made, by category, and how many were admitted. Each case is
// recorded by the test that makes it (./cases.ts) on its test's metadata; nothing else is counted.
// Exits non-zero when a case was admitted or a test failed. Extra arguments go to vitest.
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { caseCategories, casesMetaKey, type SecurityCase } from "./case-kinds.ts";

type JsonReport = {
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  testResults: {
    name: string;
    assertionResults: {
      fullName: string;
      status: string;
      meta?: Record<string, unknown>;
    }[];
  }[];
};

const root = path.resolve(import.meta.dirname, "../..");
const dir = await mkdtemp(path.join(os.tmpdir(), "peergate-security-report-"));
const output = path.join(dir, "report.json");
try {
  const run = spawnSync(
    process.execPath,
    [
      path.join(root, "node_modules", "vitest", "vitest.mjs"),
      "run",
      "test/security",
      "--reporter=dot",
      "--reporter=json",
      `--outputFile.json=${output}`,
      ...process.argv.slice(2),
    ],
    { cwd: root, stdio: "inherit" },
  );
  let report: JsonReport;
  try {
    report = JSON.parse(await readFile(output, "utf8")) as JsonReport;
  } catch {
    console.error(`vitest wrote no report (exit ${run.status ?? run.signal})`);
    process.exit(1);
  }

  const byCategory = new Map<string, { cases: number; admitted: SecurityCase[] }>(
    caseCategories.map((c) => [c, { cases: 0, admitted: [] }]),
  );
  for (const file of report.testResults) {
    for (const test of file.assertionResults) {
      const cases = (test.meta?.[casesMetaKey] ?? []) as SecurityCase[];
      for (const c of cases) {
        const entry = byCategory.get(c.category) ?? { cases: 0, admitted: [] };
        entry.cases += 1;
        if (c.admitted) entry.admitted.push(c);
        byCategory.set(c.category, entry);
      }
    }
  }
  const total = [...byCategory.values()].reduce((n, e) => n + e.cases, 0);
  const admitted = [...byCategory.values()].flatMap((e) => e.admitted);

  console.log("\nSecurity suite (test/security/): attack cases by category\n");
  console.log(`${"category".padEnd(10)} ${"cases".padStart(6)} ${"admitted".padStart(9)}`);
  for (const [category, entry] of byCategory) {
    console.log(
      `${category.padEnd(10)} ${String(entry.cases).padStart(6)} ${String(entry.admitted.length).padStart(9)}`,
    );
  }
  console.log(
    `\n${total} attack cases, ${admitted.length} admitted` +
      ` (${report.numPassedTests} tests passed, ${report.numFailedTests} failed, ${report.numPendingTests} skipped)`,
  );
  for (const c of admitted) console.log(`  ADMITTED [${c.category}] ${c.name}`);
  if (report.numPendingTests > 0) {
    console.log("  (skipped tests made no cases: see vitest's output above for why)");
  }
  process.exitCode = admitted.length > 0 || report.numFailedTests > 0 || run.status !== 0 ? 1 : 0;
} finally {
  await rm(dir, { recursive: true, force: true });
}
