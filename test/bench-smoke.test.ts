// The benchmarks cannot rot: `npm run bench -- --smoke` runs every one of them with tiny sizes
// (one run each, a 6-second soak, 40 A2A tasks) through bench/run-all.ts, which fails if a bench
// exits non-zero or does not print its table, and prints the report it would write. Here the
// report must name every target with a measured figure. Whether the targets are met is for
// BENCHMARKS.md, not for CI (a shared CI machine measures nothing reliable). A few minutes: the
// CLI bench starts an embedded server from nothing, and the run-start and idle benches start
// several.
import { spawn } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { postgresSkipReason } from "./support/databases.ts";

const repoRoot = path.resolve(import.meta.dirname, "..");
const skip = postgresSkipReason();
const benchOrder = ["ceiling", "auth", "a2a", "audit", "soak"];
const order = (name: string | undefined) => benchOrder.indexOf(name ?? "");

describe.skipIf(skip !== undefined)(
  `the benchmarks, shortened${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    it("each runs and prints its table, and the report names every target", async () => {
      const child = spawn(process.execPath, [path.join(repoRoot, "bench/run-all.ts"), "--smoke"], {
        cwd: repoRoot,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code, stderr.slice(-3_000)).toBe(0);

      for (const heading of [
        "## Machine",
        "## Targets",
        "## Ceiling",
        "## Authentication and revocation",
        "## Tools",
        "## A2A SendMessage against the a2a-js reference server",
        "## A2A push delivery",
        "## Audit appends across two instances",
        "## Growth",
        "## Run starts with the full toolset",
        "## CLI commands and the embedded start",
        "## Idle instances",
        "## Soak",
      ]) {
        expect(stdout).toContain(heading);
      }
      const verdictRows = stdout
        .split("\n")
        .filter((line) => /^\| (ceiling|auth|a2a|audit|soak) \|/.test(line));
      const benches = verdictRows.map((row) => row.split("|")[1]?.trim());
      const count = (name: string) => benches.filter((b) => b === name).length;
      // Every bench's targets are judged: the A2A bench once per SendMessage load (16/64
      // connections, 1/16 callers), each load with the same targets, and once for push delivery.
      expect({
        ceiling: count("ceiling"),
        auth: count("auth"),
        audit: count("audit"),
        soak: count("soak"),
      }).toEqual({ ceiling: 2, auth: 3, audit: 2, soak: 4 });
      // The JWT path is judged beside the bearer token and revocation.
      expect(
        verdictRows.some((row) => row.startsWith("| auth | peer JWT (jti claimed once):")),
      ).toBe(true);
      const pushRows = verdictRows.filter((row) => row.startsWith("| a2a | push delivery:"));
      expect(pushRows).toHaveLength(1);
      const sendMessage = count("a2a") - pushRows.length;
      expect(sendMessage).toBeGreaterThanOrEqual(2);
      expect(sendMessage % 4).toBe(0);
      expect(benches).toEqual([...benches].sort((x, y) => order(x) - order(y)));
      for (const row of verdictRows) {
        // The last cell names the legend's explanations of a miss or a caveat, if any.
        expect(row).toMatch(/\| (met|\*\*not met\*\*) \|[ [\]\d]*\|$/);
        expect(row).not.toMatch(/NaN|undefined/);
      }
      // The soak's own checks that do not depend on the machine's speed.
      expect(stdout).toMatch(/\| soak \| no answers other than the intended 401\/429.*\| met \|/);
      expect(stdout).toMatch(
        /\| soak \| audit chain verifies at the end \| ok, \d+ events \| met \|/,
      );
    }, 900_000);
  },
);
