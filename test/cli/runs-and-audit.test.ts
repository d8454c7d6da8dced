// What the user hit in `runs` and `audit`: the A2A task id a peer was given was a 404 in
// `runs show`, and the audit listing's filters were hard to use.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditKinds } from "../../src/cli/audit-list.ts";
import { type CliServer, cliVariants, startCliServer } from "./cli-server.ts";

for (const variant of cliVariants) {
  describe.skipIf(variant.skip !== undefined)(`runs and audit (${variant.kind})`, () => {
    let s: CliServer;
    let taskId: string;
    let runId: string;
    beforeAll(async () => {
      s = await startCliServer(variant.kind);
      const peer = await s.json("callers", "add", "runner", "--kind", "peer");
      // No model is configured: the run fails at once, which is all these tests need.
      const sent = await fetch(`${s.server.url}/a2a`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${peer.credential.secret}`,
          "content-type": "application/json",
          "a2a-version": "1.0",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "SendMessage",
          params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] } },
        }),
      });
      const answer = (await sent.json()) as { result: { task?: { id: string } } };
      taskId = String(answer.result.task?.id);
      runId = (await s.json("runs", "list", "--caller", "runner")).runs[0].id;
    });
    afterAll(async () => s?.stop());

    it("`audit --subject caller:<name>` finds the caller's events by name", async () => {
      const byName = await s.json("audit", "--subject", "caller:runner");
      expect(byName.events.map((e: { kind: string }) => e.kind)).toContain("caller.created");
      const missing = await s.cli("audit", "--subject", "caller:nobody");
      expect(missing.code).not.toBe(0);
      expect(missing.err).toContain("nobody");
    });

    it("an unknown `--kind` lists the kinds instead of saying there are no events", async () => {
      const r = await s.cli("audit", "--kind", "caller.vanished");
      expect(r.code).toBe(2);
      expect(r.err).toContain("not a kind of audit event");
      expect(r.err).toContain("caller.revoked");
    });

    it("the `more` hint keeps the filters", async () => {
      await s.json("callers", "add", "second", "--kind", "peer");
      const r = await s.cli("audit", "--kind", "caller.created", "--limit", "1");
      expect(r.out).toMatch(/more: peergate audit --limit 1 --kind caller\.created --after \d+/);
      const next = /--after (\d+)/.exec(r.out)?.[1];
      const page = await s.json(
        "audit",
        "--kind",
        "caller.created",
        "--limit",
        "1",
        "--after",
        String(next),
      );
      expect(page.events.map((e: { kind: string }) => e.kind)).toEqual(["caller.created"]);
    });

    it("DATA is JSON escaped for the terminal once", async () => {
      await s.json(
        "callers",
        "add",
        "hooked",
        "--kind",
        "webhook",
        "--prompt",
        'say "hi" {{payload}}',
      );
      await s.cli("callers", "set", "hooked", "--prompt", "new \u202e\u001b[31m {{payload}}");
      const r = await s.cli("audit", "--kind", "caller.updated");
      expect(r.out).toContain('"to":"new \\u{202e}\\u001b[31m {{payload}}"');
      expect(r.out).not.toContain("\\\\");
    });

    it("`runs show` accepts the A2A task id where the run id goes", async () => {
      expect(taskId).not.toBe("undefined");
      expect(taskId).not.toBe(runId);
      const shown = await s.cli("runs", "show", taskId);
      expect(shown.err).toBe("");
      expect(shown.code).toBe(0);
      expect(shown.out).toContain(`run ${runId}`);
      expect((await s.json("runs", "show", taskId)).run.id).toBe(runId);
    });
  });
}

describe("audit kinds", () => {
  it("lists every kind of event the source writes", async () => {
    const found = new Set<string>();
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) await walk(file);
        else if (file.endsWith(".ts"))
          for (const m of (await readFile(file, "utf8")).matchAll(/kind: "([a-z-]+\.[a-z-]+)"/g))
            if (m[1]) found.add(m[1]);
      }
    };
    await walk(path.join(import.meta.dirname, "../../src"));
    const missing = [...found].filter((k) => !auditKinds.includes(k) && !k.startsWith("daily."));
    expect(missing).toEqual([]);
  });
});
