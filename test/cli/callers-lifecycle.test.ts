// The CLI drives the whole life of a caller of each kind against a real running server.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { loadConfig } from "../../src/config.ts";
import { callers, runs } from "../../src/db/schema.ts";
import { silentLogger } from "../../src/log.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

const variants = [
  { kind: "pglite", skip: undefined as string | undefined },
  { kind: "postgres", skip: postgresSkipReason() },
];

for (const variant of variants) {
  describe.skipIf(variant.skip !== undefined)(`peergate callers (${variant.kind})`, () => {
    let dir: string;
    let server: RunningServer;
    let env: Record<string, string>;
    let dropDb: (() => Promise<void>) | undefined;
    /** The operator token, in a file as `--operator-token-file` reads it. */
    let operatorFile: string;

    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "peergate-cli-"));
      env = {
        PEERGATE_DATA_DIR: path.join(dir, "data"),
        PEERGATE_POLICIES_DIR: repoPoliciesDir,
        PEERGATE_PORT: "0",
        PEERGATE_LOG_LEVEL: "silent",
      };
      if (variant.kind === "postgres") {
        const db = await createPostgresTestDatabase();
        env.DATABASE_URL = db.url;
        dropDb = db.drop;
      }
      server = await startServer(loadConfig(env, dir), silentLogger);
      env.PEERGATE_URL = server.url;
      // While the server runs: through its control socket (embedded database) or the database.
      const created = await json("operator-token", "create");
      operatorFile = path.join(dir, "operator-token");
      await writeFile(operatorFile, created.operatorToken, { mode: 0o600 });
    });
    afterAll(async () => {
      await server?.stop();
      await dropDb?.();
      await rm(dir, { recursive: true, force: true });
    });

    const cli = async (...argv: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(commands, argv, {
        env,
        cwd: dir,
        io: { out: (t) => out.push(t), err: (t) => err.push(t) },
        signal: new AbortController().signal,
      });
      return { code, out: out.join("\n"), err: err.join("\n") };
    };
    const json = async (...argv: string[]) => {
      const r = await cli(...argv, "--json");
      expect(r.err).toBe("");
      expect(r.code).toBe(0);
      return JSON.parse(r.out) as any;
    };

    it("creates the operator token while the server runs, and asks for --force to replace it", async () => {
      const again = await cli("operator-token", "create");
      expect(again.code).toBe(1);
      expect(again.err).toContain("--force");
      expect(again.err).toContain("old one stop working");
      expect(again.out).toBe("");
      const old = (await readFile(operatorFile, "utf8")).trim();
      const forced = await cli("operator-token", "create", "--force");
      expect(forced.code).toBe(0);
      expect(forced.out).toContain("The previous operator token no longer works.");
      const fresh = /pgo_[A-Za-z0-9_-]+/.exec(forced.out)?.[0];
      expect(fresh).toBeDefined();
      expect(fresh).not.toBe(old);
      // The old one is dead: a widening with it is refused as a bad credential.
      await writeFile(operatorFile, old);
      const withOld = await cli(
        "callers",
        "add",
        "zed",
        "--kind",
        "peer",
        "--tier",
        "private",
        "--operator-token-file",
        operatorFile,
      );
      expect(withOld.code).toBe(1);
      expect(withOld.err).toContain("401");
      await writeFile(operatorFile, String(fresh));
    });

    it("refuses a widening without the operator token, naming it and the fields", async () => {
      const refused = await cli("callers", "add", "zed", "--kind", "peer", "--tier", "private");
      expect(refused.code).toBe(1);
      expect(refused.err).toContain("403");
      expect(refused.err).toContain("X-Peergate-Operator-Token");
      expect(refused.err).toContain("tier: public → private");
      expect(refused.err).toContain("PEERGATE_OPERATOR_TOKEN or --operator-token-file");
      expect((await cli("callers", "show", "zed")).code).toBe(1);
    });

    it("adds a caller of each kind and prints each credential once", async () => {
      const peer = await cli(
        "callers",
        "add",
        "alice",
        "--kind",
        "peer",
        "--tier",
        "internal",
        "--allow",
        "web_fetch",
        "--operator-token-file",
        operatorFile,
      );
      expect(peer.code).toBe(0);
      expect(peer.out).toMatch(/Credential \(shown once.*\n {2}pg_[A-Za-z0-9_-]{43}/);
      const gh = await json(
        "callers",
        "add",
        "repo",
        "--kind",
        "github",
        "--prompt",
        "Triage {{event}}: {{payload}}",
        "--events",
        "issues.opened",
      );
      expect(gh.credential.secret).toMatch(/^pgh_/);
      const ifttt = await cli(
        "callers",
        "add",
        "phone",
        "--kind",
        "ifttt",
        "--prompt",
        "Note: {{payload}}",
      );
      expect(ifttt.out).toContain(`${server.url}/webhooks/ifttt/phone/pgi_`);
      const hook = await json(
        "callers",
        "add",
        "ci",
        "--kind",
        "webhook",
        "--prompt",
        "CI: {{payload}}",
        "--budget",
        "steps=5",
        "--budget",
        "daily.runs=10",
        "--operator-token-file",
        operatorFile,
      );
      expect(hook.caller.budgets).toMatchObject({ steps: 5, daily: { runs: 10 } });

      const list = await cli("callers", "list");
      expect(list.out.split("\n")[0]).toMatch(/^NAME\s+KIND\s+TIER\s+STATE/);
      for (const name of ["alice", "repo", "phone", "ci"]) expect(list.out).toContain(name);
      expect(list.out).not.toMatch(/pg[a-z]?_[A-Za-z0-9_-]{20}/);
    });

    it("shows, narrows, explains, rotates, revokes and restores", async () => {
      const shown = await cli("callers", "show", "alice");
      expect(shown.out).toContain("tier:      internal");
      const set = await json(
        "callers",
        "set",
        "alice",
        "--tier",
        "public",
        "--allow",
        "web_fetch,write_file",
        "--operator-token-file",
        operatorFile,
      );
      expect(set.changed.sort()).toEqual(["allow", "tier"]);
      const ceiling = await cli("ceiling", "alice");
      expect(ceiling.code).toBe(0);
      expect(ceiling.out).toMatch(/write_file\s+yes\s+named-in-allow/);
      expect(ceiling.out).toMatch(/read_file\s+no\s+disclosure-above-tier/);
      const rotated = await cli(
        "callers",
        "rotate",
        "alice",
        "--grace",
        "60",
        "--operator-token-file",
        operatorFile,
      );
      expect(rotated.out).toMatch(/old credentials work until \d{4}-/);
      const revoked = await cli("callers", "revoke", "alice", "--reason", "test");
      expect(revoked.out).toBe(
        "revoked alice: 2 credential(s) killed, 0 waiting run(s) ended, 0 working run(s) stopping",
      );
      const emptied = await json("ceiling", "alice");
      expect(emptied.admitted).toEqual([]);
      const refused = await cli("callers", "set", "alice", "--tier", "private");
      expect(refused.code).toBe(1);
      expect(refused.err).toContain("409");
      const restored = await cli(
        "callers",
        "restore",
        "alice",
        "--tier",
        "public",
        "--operator-token-file",
        operatorFile,
      );
      expect(restored.out).toMatch(/pg_[A-Za-z0-9_-]{43}/);
    });

    it("applies a callers file idempotently and reports drift", async () => {
      const file = path.join(dir, "callers.yaml");
      await writeFile(
        file,
        [
          "callers:",
          "  - name: bob",
          "    kind: peer",
          "    tier: internal",
          "    allow: [web_fetch]",
          "  - name: ci",
          "    kind: webhook",
          "    promptTemplate: 'CI changed: {{payload}}'",
        ].join("\n"),
      );
      const first = await json(
        "callers",
        "apply",
        "-f",
        file,
        "--operator-token-file",
        operatorFile,
      );
      const actions = Object.fromEntries(first.actions.map((a: any) => [a.name, a.action]));
      expect(actions).toMatchObject({ bob: "create", ci: "update", alice: "drift", repo: "drift" });
      expect(first.credentials.map((c: any) => c.name)).toEqual(["bob"]);
      const second = await json("callers", "apply", "-f", file);
      expect(
        second.actions.filter((a: any) => a.action === "create" || a.action === "update"),
      ).toEqual([]);
      expect(second.credentials).toEqual([]);

      await writeFile(file, "callers:\n  - name: eve\n    kind: peer\n    token: pg_stolen\n");
      const secret = await cli("callers", "apply", "-f", file);
      expect(secret.code).toBe(2);
      expect(secret.err).toContain("must not hold secrets");
    });

    it("lists and verifies the audit trail through the running server", async () => {
      const audit = await json("audit", "--kind", "caller.revoked");
      expect(audit.events).toHaveLength(1);
      const verify = await cli("audit", "verify");
      expect(verify.code).toBe(0);
      expect(verify.out).toMatch(/^audit chain intact: \d+ events/);
    });

    it("lists and shows runs, and refuses an approval without the operator token", async () => {
      const peer = await json("callers", "add", "runner", "--kind", "peer");
      // No model is configured here: the run fails at once, with the message saying how to fix it.
      const sent = await fetch(`${server.url}/a2a`, {
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
      expect(sent.status).toBe(200);
      const listed = await json("runs", "list", "--caller", "runner");
      expect(listed.runs).toHaveLength(1);
      const run = listed.runs[0];
      expect(run).toMatchObject({
        callerName: "runner",
        status: "failed",
        error: { code: "no-model" },
      });
      const shown = await cli("runs", "show", run.id);
      expect(shown.out).toContain(`run ${run.id}`);
      expect(shown.out).toContain("no-model");
      const approve = await cli(
        "runs",
        "approve",
        run.id,
        "--call",
        "c1",
        "--digest",
        "0".repeat(64),
      );
      expect(approve.code).toBe(2);
      expect(approve.err).toContain("operator token");
      const cancel = await cli("runs", "cancel", run.id);
      expect(cancel.code).toBe(1);
      expect(cancel.out).toBe("not running on any instance");
    });

    it("runs show prints a parked call's ANSI/OSC arguments escaped, never raw", async () => {
      const [peer] = await server.database.db
        .select({ id: callers.id })
        .from(callers)
        .where(eq(callers.name, "runner"));
      // What a model could put in a call's arguments: clear the screen, rewrite the line, set
      // the title, reverse text, hide a word.
      const args = {
        path: "notes.txt\u001b[2J\u001b[1;1H",
        content: "ok\r\u001b]0;approved\u0007\u009b31m\u202egnp.exe\u200b",
      };
      const [run] = await server.database.db
        .insert(runs)
        .values({
          callerId: String(peer?.id),
          origin: "a2a",
          status: "parked",
          approvalPolicy: "read-only",
          toolSet: ["write_file\u001b[8m"],
          pendingApproval: {
            callId: "call\u001b[1A",
            tool: "write_file",
            argsDigest: "0".repeat(64),
            args,
            requestedAt: new Date().toISOString(),
          },
        })
        .returning({ id: runs.id });
      const raw = {
        asymmetricMatch: (text: string) =>
          [...text].some((c) => {
            const code = c.codePointAt(0) ?? 0;
            return (
              (code < 0x20 && code !== 0x0a) ||
              (code >= 0x7f && code <= 0x9f) ||
              code === 0x202e ||
              code === 0x200b
            );
          }),
      };
      const shown = await cli("runs", "show", String(run?.id));
      expect(shown.code).toBe(0);
      expect(shown.out).not.toEqual(raw);
      expect(shown.out).toContain("notes.txt\\u001b[2J");
      expect(shown.out).toContain("\\u009b31m\\u202egnp.exe\\u200b");
      expect(shown.out).toContain("call ");
      const asJson = await cli("runs", "show", String(run?.id), "--json");
      expect(asJson.out).not.toEqual(raw);
      expect(JSON.parse(asJson.out).run.pending.args).toEqual(args);
      const listed = await cli("runs", "list", "--status", "parked");
      expect(listed.out).not.toEqual(raw);
      expect("x\u001by").toEqual(raw);
    });

    it("explains bad usage with the command's help and exit code 2", async () => {
      const r = await cli("callers", "add", "x");
      expect(r.code).toBe(2);
      expect(r.err).toContain("--kind is required");
      expect(r.err).toContain("Usage: peergate callers add");
      const bad = await cli("callers", "add", "Bad Name", "--kind", "peer");
      expect(bad.code).toBe(1);
      expect(bad.err).toContain("name: got");
    });
  });
}
