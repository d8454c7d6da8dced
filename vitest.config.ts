// The suite in three layers, by folder (docs/testing.md):
// - unit: no database, no process, no network — the pure rooms (policy, the shell reader), the
//   test helpers' own tests and test/unit, milliseconds each;
// - db: one module or the in-process app against a database, PGlite and (when present) a real
//   PostgreSQL; every folder not named below lands here, so a new folder is never left out;
// - system: real processes, the whole server on a port (test/server), faults, end-to-end runs, the
//   browser, the executed docs, the bench smoke test — minutes.
// Each file is in exactly one layer: db is everything, minus unit and system. `npm test` runs all
// three (one PostgreSQL for the whole run: globalSetup is the root's, run once); `npm run
// test:fast` runs unit and db on PGlite for the inner loop.
import { defineConfig } from "vitest/config";

const unit = [
  "test/unit/**/*.test.ts",
  "test/policy/**/*.test.ts",
  "test/shell/**/*.test.ts",
  "test/architecture/**/*.test.ts",
  "test/support/**/*.test.ts",
];

const system = [
  "test/e2e/**/*.test.ts",
  "test/faults/**/*.test.ts",
  "test/process/**/*.test.ts",
  "test/sandbox/**/*.test.ts",
  "test/security/**/*.test.ts",
  "test/console/**/*.test.ts",
  "test/notify/**/*.test.ts",
  "test/cli/**/*.test.ts",
  "test/server/**/*.test.ts",
  "test/bench-smoke.test.ts",
  // By kind, wherever they are: end-to-end runs, browser suites, executed docs.
  "test/**/*.e2e.test.ts",
  "test/**/*.browser.test.ts",
  "test/**/*-doc.test.ts",
];

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two files at a time, whatever the core count: most files wait on a server, a child process
    // or a database more than they compute, and one at a time (vitest's default on two cores is
    // cores − 1) made the whole suite 33 minutes. Every test must hold under this load: a test
    // that passes alone and fails beside another file is a defect (docs/testing.md).
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: { name: "unit", include: unit, exclude: system },
      },
      {
        extends: true,
        test: {
          name: "db",
          include: ["test/**/*.test.ts"],
          exclude: [...unit, ...system],
        },
      },
      { extends: true, test: { name: "system", include: system } },
    ],
  },
});
