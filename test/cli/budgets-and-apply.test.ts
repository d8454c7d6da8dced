// What the user hit: `callers set --budget` dropped every other cap, `apply` replaced `daily`,
// one bad entry in `callers apply` left the ones before it created with their credentials never
// shown, and `--dry-run` said "would create" for an invalid entry.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultBudgets } from "../../src/services/caller-input.ts";
import { type CliServer, cliVariants, startCliServer } from "./cli-server.ts";

for (const variant of cliVariants) {
  describe.skipIf(variant.skip !== undefined)(`budgets and apply (${variant.kind})`, () => {
    let s: CliServer;
    beforeAll(async () => {
      s = await startCliServer(variant.kind);
    });
    afterAll(async () => s?.stop());
    const budgetsOf = async (name: string) =>
      (await s.json("callers", "show", name)).caller.budgets;

    it("`callers set --budget` changes only the limits it names, daily ones included", async () => {
      await s.json("callers", "add", "narrow", "--kind", "peer");
      expect(await budgetsOf("narrow")).toEqual(defaultBudgets);
      const set = await s.cli(
        "callers",
        "set",
        "narrow",
        "--budget",
        "steps=5",
        "--budget",
        "daily.runs=10",
      );
      expect(set.err).toBe("");
      expect(set.code).toBe(0);
      expect(await budgetsOf("narrow")).toEqual({
        ...defaultBudgets,
        steps: 5,
        daily: { ...defaultBudgets.daily, runs: 10 },
      });
    });

    it("removing a limit is explicit and needs the operator token", async () => {
      const refused = await s.cli("callers", "set", "narrow", "--clear-budget", "costUsd");
      expect(refused.code).not.toBe(0);
      expect(refused.err).toContain("operator token");
      expect((await budgetsOf("narrow")).costUsd).toBe(defaultBudgets.costUsd);
      const removed = await s.cli(
        "callers",
        "set",
        "narrow",
        "--budget",
        "costUsd=",
        "--clear-budget",
        "daily.costUsd",
        "--operator-token-file",
        s.operatorFile,
      );
      expect(removed.err).toBe("");
      const after = await budgetsOf("narrow");
      expect(after.costUsd).toBeUndefined();
      expect(after.daily.costUsd).toBeUndefined();
      expect(after.steps).toBe(5);
      expect(after.daily.runs).toBe(10);
    });

    it("`callers add --clear-budget` drops a default limit only with the operator token", async () => {
      const refused = await s.cli(
        "callers",
        "add",
        "uncapped",
        "--kind",
        "peer",
        "--clear-budget",
        "daily.costUsd",
      );
      expect(refused.code).not.toBe(0);
      expect(refused.err).toContain("operator token");
      expect(refused.err).toContain("budgets.daily.costUsd");
      const created = await s.json(
        "callers",
        "add",
        "uncapped",
        "--kind",
        "peer",
        "--clear-budget",
        "daily.costUsd",
        "--operator-token-file",
        s.operatorFile,
      );
      const { costUsd: _, ...otherDaily } = defaultBudgets.daily ?? {};
      expect(created.caller.budgets).toEqual({ ...defaultBudgets, daily: otherDaily });
    });

    it("`callers add` merges daily budgets into the defaults", async () => {
      const created = await s.json(
        "callers",
        "add",
        "merged",
        "--kind",
        "peer",
        "--budget",
        "daily.runs=7",
      );
      expect(created.caller.budgets.daily).toEqual({ ...defaultBudgets.daily, runs: 7 });
    });

    it("`callers apply` merges budgets, daily included, into what is stored", async () => {
      const file = path.join(s.dir, "merge.yaml");
      await writeFile(
        file,
        "callers:\n  - name: merged\n    budgets:\n      daily:\n        tokens: 1000\n",
      );
      const applied = await s.cli("callers", "apply", "-f", file);
      expect(applied.err).toBe("");
      expect(applied.out).toContain("update merged: budgets");
      expect((await budgetsOf("merged")).daily).toEqual({
        ...defaultBudgets.daily,
        runs: 7,
        tokens: 1000,
      });
      expect((await s.cli("callers", "apply", "-f", file)).out).toContain("unchanged merged");
    });

    it("`callers apply` with one bad entry applies nothing and names the caller and field", async () => {
      const file = path.join(s.dir, "bad.yaml");
      await writeFile(
        file,
        [
          "callers:",
          "  - name: first-good",
          "    kind: peer",
          "  - name: second-bad",
          "    kind: peer",
          "    tier: galactic",
          "  - name: merged",
          "    approvalPolicy: sometimes",
          "",
        ].join("\n"),
      );
      for (const extra of [["--dry-run"], []]) {
        const r = await s.cli("callers", "apply", "-f", file, ...extra);
        expect(r.code).not.toBe(0);
        expect(r.out).not.toContain("would create");
        expect(r.err).toContain("nothing was applied");
        expect(r.err).toContain("caller second-bad: tier");
        expect(r.err).toContain("caller merged: approvalPolicy");
      }
      const names = (await s.json("callers", "list")).callers.map((c: { name: string }) => c.name);
      expect(names).not.toContain("first-good");
    });

    it("`callers apply --dry-run` refuses a widening without the operator token, as the real run would", async () => {
      const file = path.join(s.dir, "wide.yaml");
      await writeFile(file, "callers:\n  - name: wide\n    kind: peer\n    tier: internal\n");
      const dry = await s.cli("callers", "apply", "-f", file, "--dry-run");
      expect(dry.code).not.toBe(0);
      expect(dry.err).toContain("caller wide: creating it needs the operator token (tier)");
      const real = await s.cli(
        "callers",
        "apply",
        "-f",
        file,
        "--operator-token-file",
        s.operatorFile,
      );
      expect(real.err).toBe("");
      expect(real.out).toContain("create wide");
      expect(real.out).toMatch(/Credential for wide[^\n]*\n {2}pg_/);
    });
  });
}
