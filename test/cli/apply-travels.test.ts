// State that travels (what an operator hit): `callers export` left push grants out, so export →
// apply was not a round trip; apply's dry run named fields, not values; apply never removed what
// the file omits. Through the CLI against the real server, on PGlite and PostgreSQL.
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliServer, cliVariants, startCliServer } from "./cli-server.ts";

for (const variant of cliVariants) {
  describe.skipIf(variant.skip !== undefined)(`callers apply travels (${variant.kind})`, () => {
    let s: CliServer;
    beforeAll(async () => {
      s = await startCliServer(variant.kind);
    });
    afterAll(async () => s?.stop());
    const op = () => ["--operator-token-file", s.operatorFile];
    /** The admin API itself, for what the CLI has no verb for (push grants). */
    const admin = async (method: string, route: string, body?: unknown, operator = false) => {
      const token = (
        await readFile(path.join(s.env.PEERGATE_DATA_DIR ?? "", "admin-token"), "utf8")
      ).trim();
      const res = await fetch(`${s.server.url}/admin/v1${route}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          ...(operator
            ? { "x-peergate-operator-token": (await readFile(s.operatorFile, "utf8")).trim() }
            : {}),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const names = async () =>
      (await s.json("callers", "list")).callers.map((c: { name: string }) => c.name).sort();
    const auditKinds = async (subjectName: string) =>
      (await s.json("audit", "--limit", "200")).events
        .filter((e: { data?: { name?: string } }) => e.data?.name === subjectName)
        .map((e: { kind: string }) => e.kind);

    it("export carries push grants, and applying it puts them back", async () => {
      await s.json("callers", "add", "pusher", "--kind", "peer");
      const put = await admin(
        "PUT",
        "/callers/pusher/push-hosts",
        {
          hosts: ["hooks.example.com"],
        },
        true,
      );
      expect(put.status).toBe(200);

      const file = path.join(s.dir, "travel.yaml");
      const wrote = await s.cli("callers", "export", "-o", file);
      expect(wrote.err).toBe("");
      const text = await readFile(file, "utf8");
      expect(text).toMatch(/name: pusher[\s\S]*pushHosts:\n\s+- hooks\.example\.com/);

      // The grant is removed on the server; the file still has it.
      expect((await admin("PUT", "/callers/pusher/push-hosts", { hosts: [] })).status).toBe(200);
      const dry = await s.cli("callers", "apply", "-f", file, "--dry-run", ...op());
      expect(dry.err).toBe("");
      expect(dry.out).toContain("would update pusher: pushHosts");
      // Old → new, by value.
      expect(dry.out).toContain('pushHosts: [] → ["hooks.example.com"]');
      expect(dry.out).toContain("needs the operator token");
      const hostsNow = await admin("GET", "/callers/pusher/push-hosts");
      expect(hostsNow.body.hosts).toEqual([]);

      // Adding a push host widens: without the operator token nothing is applied.
      const refused = await s.cli("callers", "apply", "-f", file);
      expect(refused.code).not.toBe(0);
      expect(refused.err).toContain("nothing was applied");
      expect(refused.err).toContain(
        "caller pusher: the change widens it and needs the operator token (pushHosts)",
      );

      const applied = await s.cli("callers", "apply", "-f", file, ...op());
      expect(applied.err).toBe("");
      expect((await admin("GET", "/callers/pusher/push-hosts")).body.hosts).toEqual([
        "hooks.example.com",
      ]);
      const again = await s.cli("callers", "apply", "-f", file, "--dry-run");
      expect(again.out).toContain("unchanged pusher");
    });

    it("a dry run shows each change as old → new and changes nothing", async () => {
      await s.json("callers", "add", "valued", "--kind", "peer");
      const file = path.join(s.dir, "valued.yaml");
      await writeFile(
        file,
        "callers:\n  - name: valued\n    approvalPolicy: read-only\n    commands: [git status]\n",
      );
      const dry = await s.cli("callers", "apply", "-f", file, "--dry-run", ...op());
      expect(dry.err).toBe("");
      expect(dry.out).toContain('approvalPolicy: "auto" → "read-only"');
      expect(dry.out).toContain('commands: [] → ["git status"]');
      expect((await s.json("callers", "show", "valued")).caller.approvalPolicy).toBe("auto");
      const json = JSON.parse(
        (await s.cli("callers", "apply", "-f", file, "--dry-run", "--json", ...op())).out,
      );
      expect(json.dryRun).toBe(true);
      expect(json.actions.find((a: { name: string }) => a.name === "valued").changes).toEqual({
        approvalPolicy: { from: "auto", to: "read-only" },
        commands: { from: [], to: ["git status"] },
      });
    });

    it("--prune revokes what the file omits, then deletes it when nothing refers to it; one transaction", async () => {
      await s.json("callers", "add", "kept", "--kind", "peer");
      await s.json("callers", "add", "stray", "--kind", "peer");
      const file = path.join(s.dir, "prune.yaml");
      const exported = await s.cli("callers", "export");
      const lines = exported.out.split("\n");
      // The export without `stray`: every other caller stays as it is.
      const start = lines.indexOf("  - name: stray");
      expect(start).toBeGreaterThan(-1);
      let end = start + 1;
      while (end < lines.length && !lines[end]?.startsWith("  - name:")) end++;
      await writeFile(file, [...lines.slice(0, start), ...lines.slice(end)].join("\n"));

      const dry = await s.cli("callers", "apply", "-f", file, "--prune", "--dry-run", ...op());
      expect(dry.err).toBe("");
      expect(dry.out).toContain("would revoke stray");
      expect(dry.out).toContain("would delete stray");
      expect(await names()).toContain("stray");

      // One bad entry: nothing of it is applied, the prune included.
      const bad = path.join(s.dir, "prune-bad.yaml");
      await writeFile(
        bad,
        `${await readFile(file, "utf8")}\n  - name: broken\n    kind: peer\n    tier: galactic\n`,
      );
      const refused = await s.cli("callers", "apply", "-f", bad, "--prune", ...op());
      expect(refused.code).not.toBe(0);
      expect(refused.err).toContain("caller broken: tier");
      expect(await names()).toContain("stray");
      expect((await s.json("callers", "show", "stray")).caller.revoked).toBe(false);

      const pruned = await s.cli("callers", "apply", "-f", file, "--prune", ...op());
      expect(pruned.err).toBe("");
      expect(pruned.out).toContain("revoke stray");
      expect(pruned.out).toContain("delete stray");
      expect(await names()).not.toContain("stray");
      expect(await names()).toContain("kept");
      expect(await auditKinds("stray")).toEqual(
        expect.arrayContaining(["caller.created", "caller.revoked", "caller.deleted"]),
      );
      // Without --prune, a caller the file omits is drift, left alone.
      const plain = await s.cli("callers", "apply", "-f", path.join(s.dir, "valued.yaml"), ...op());
      expect(plain.out).toContain("drift   kept is on the server but not in the file");
    });
  });
}
