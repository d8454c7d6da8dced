// `peergate migrate-data` moves everything between the embedded database and PostgreSQL: an
// embedded server's callers (a bearer peer, a JWT peer, a webhook, a revoked one), push grants, a
// finished A2A run and the audit trail, copied to PostgreSQL, where a server accepts the old
// bearer token and `audit verify` passes; then back into a new embedded directory. And what it
// refuses: a source still served, a target that is not empty or not migrated.
import { readFileSync } from "node:fs";
import { readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { getTableName } from "drizzle-orm";
import { exportJWK, generateKeyPair } from "jose";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { loadConfig } from "../../src/config.ts";
import { migrationsFolder } from "../../src/db/migrate.ts";
import { silentLogger } from "../../src/log.ts";
import { startServer } from "../../src/server.ts";
import { copiedTables, derivedTables, schemaTableNames } from "../../src/services/migrate-data.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import { createOpenAiStub, type OpenAiStub } from "../support/openai-stub.ts";
import { type CliResult, type CliServer, startCliServer } from "./cli-server.ts";

type Counts = { table: string; source: number; target?: number }[];

async function cli(
  env: Record<string, string>,
  cwd: string,
  ...argv: string[]
): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(commands, argv, {
    env,
    cwd,
    io: { out: (t) => out.push(t), err: (t) => err.push(t) },
    signal: new AbortController().signal,
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

describe("migrate-data's table list", () => {
  it("handles every table of the schema and of the migrations", async () => {
    const handled = [...copiedTables, ...derivedTables].map((t) => getTableName(t)).sort();
    expect(handled).toEqual(schemaTableNames());
    const created = new Set<string>();
    for (const file of await readdir(migrationsFolder)) {
      if (!file.endsWith(".sql")) continue;
      const text = readFileSync(path.join(migrationsFolder, file), "utf8");
      for (const m of text.matchAll(
        /CREATE TABLE (?:IF NOT EXISTS )?"(?:public"\.")?([a-z0-9_]+)"/gi,
      )) {
        if (m[1]) created.add(m[1]);
      }
    }
    expect(handled).toEqual([...created].sort());
  });
});

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)("peergate migrate-data (embedded ⇄ PostgreSQL)", () => {
  let s: CliServer;
  let stub: OpenAiStub;
  let dataDir: string;
  let peerSecret: string;
  let taskId: string;
  let runStatus: string;
  let pg: { url: string; drop(): Promise<void> };
  let sourceCounts: Counts;
  let sourceAuditCount: number;
  const env = () => ({ ...s.env, PEERGATE_URL: "http://127.0.0.1:9" });

  beforeAll(async () => {
    stub = createOpenAiStub();
    const baseUrl = await stub.listen();
    stub.respondWith(() => ({ text: "moved and answered" }));
    s = await startCliServer("pglite", {
      env: {
        PEERGATE_MODEL: "openai-compatible:local-qwen",
        PEERGATE_MODEL_BASE_URL: baseUrl,
        PEERGATE_SANDBOX: "none",
      },
    });
    dataDir = s.env.PEERGATE_DATA_DIR as string;
    // Callers of every kind, through the CLI.
    const peer = await s.json("callers", "add", "peer-a", "--kind", "peer", "--tier", "public");
    peerSecret = peer.credential.secret;
    const key = await generateKeyPair("ES256", { extractable: true });
    const jwkFile = path.join(s.dir, "partner.jwk.json");
    await writeFile(jwkFile, JSON.stringify(await exportJWK(key.publicKey)));
    await s.json(
      "callers",
      "add",
      "partner",
      "--kind",
      "peer",
      "--jwt-issuer",
      "https://partner.example",
      "--jwt-jwk-file",
      jwkFile,
    );
    await s.json("callers", "add", "gh", "--kind", "github", "--prompt", "triage {{payload}}");
    await s.json("callers", "add", "gone", "--kind", "peer");
    await s.json("callers", "revoke", "gone");
    // A push grant (widening: the operator token too).
    const file = path.join(s.dir, "callers.yaml");
    await writeFile(file, "callers:\n  - name: peer-a\n    pushHosts: [hooks.example.com]\n");
    const applied = await s.cli(
      "callers",
      "apply",
      "-f",
      file,
      "--operator-token-file",
      s.operatorFile,
    );
    expect(applied.code, applied.err).toBe(0);
    // A run of the peer over A2A, answered by the stub model.
    const sent = await fetch(`${s.server.url}/a2a`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${peerSecret}`,
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
    // The stub model is unpriced, so the default cost budget may end the run failed: any end will do.
    runStatus = await eventually("the run to end", async () => {
      const runs = (await s.json("runs", "list", "--caller", "peer-a")).runs as {
        status: string;
      }[];
      const status = runs[0]?.status;
      return status && !["submitted", "working"].includes(status) ? status : undefined;
    });
    await s.server.stop();
    const verified = await cli(env(), s.dir, "audit", "verify", "--json");
    expect(verified.code, verified.err).toBe(0);
    sourceAuditCount = JSON.parse(verified.out).count;
    const created = await createPostgresTestDatabase({ migrate: true });
    pg = created;
  }, 240_000);

  afterAll(async () => {
    await stub?.close();
    await pg?.drop();
    if (s) await rm(s.dir, { recursive: true, force: true });
  });

  it("a dry run checks both sides, counts every table and copies nothing", async () => {
    const r = await cli(env(), s.dir, "migrate-data", "--from", dataDir, "--to", pg.url, "--json");
    expect(r.code, r.err).toBe(0);
    const result = JSON.parse(r.out) as { ok: boolean; apply: boolean; tables: Counts };
    expect(result).toMatchObject({ ok: true, apply: false });
    sourceCounts = result.tables;
    const count = (table: string) => sourceCounts.find((t) => t.table === table)?.source;
    expect(count("callers")).toBe(4);
    expect(count("caller_push_hosts")).toBe(1);
    expect(count("runs")).toBe(1);
    expect(count("a2a_tasks")).toBe(1);
    expect(count("a2a_task_events")).toBeGreaterThan(0);
    expect(count("audit_events")).toBe(sourceAuditCount);
    const text = await cli(env(), s.dir, "migrate-data", "--from", dataDir, "--to", pg.url);
    expect(text.out).toContain("dry run: nothing copied");
    expect(text.out).not.toContain(new URL(pg.url).password || "\u0000");
  });

  it("refuses a source whose data directory another process holds", async () => {
    // A lock held by a live process that is not this one: the vitest parent.
    const lock = `${path.join(dataDir, "pg")}.lock`;
    await writeFile(lock, JSON.stringify({ pid: process.ppid, token: "x", createdAt: "now" }));
    try {
      const r = await cli(
        env(),
        s.dir,
        "migrate-data",
        "--from",
        dataDir,
        "--to",
        pg.url,
        "--apply",
      );
      expect(r.code).toBe(1);
      expect(r.err).toContain("refused; nothing was copied");
      expect(r.err).toContain(`pid ${process.ppid}`);
      expect(r.err).toContain("Stop the server that uses it");
    } finally {
      await rm(lock, { force: true });
    }
  });

  it("refuses a target that is not migrated, naming `peergate migrate`", async () => {
    const bare = await createPostgresTestDatabase({ migrate: false });
    try {
      const r = await cli(env(), s.dir, "migrate-data", "--from", dataDir, "--to", bare.url);
      expect(r.code).toBe(1);
      expect(r.err).toContain("peergate migrate");
    } finally {
      await bare.drop();
    }
  });

  it("copies everything to PostgreSQL: the old token works there and the audit chain verifies", async () => {
    const r = await cli(
      env(),
      s.dir,
      "migrate-data",
      "--from",
      dataDir,
      "--to",
      pg.url,
      "--apply",
      "--json",
    );
    expect(r.code, r.err).toBe(0);
    const result = JSON.parse(r.out) as { tables: Counts };
    for (const t of result.tables) expect(t.target, t.table).toBe(t.source);
    expect(result.tables.map((t) => t.source)).toEqual(sourceCounts.map((t) => t.source));
    expect(r.err).toContain("callers: 4 rows copied");

    // The copied events keep their transactions apart, in the chain's order (the filtered audit
    // pages walk a kind's events by xact_id): not one id for the whole copy.
    const target = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      const [order] = await target<{ xacts: number; events: number; outOfOrder: number }[]>`
        select count(distinct e.xact_id)::int as xacts, count(*)::int as events,
               count(*) filter (where x.by_xact <> x.by_seq)::int as "outOfOrder"
          from audit_events e
          join (select c.event_id, row_number() over (order by e2.xact_id, c.seq) as by_xact,
                       row_number() over (order by c.seq) as by_seq
                  from audit_chain c join audit_events e2 on e2.id = c.event_id) x
            on x.event_id = e.id`;
      expect(order?.events).toBe(sourceAuditCount);
      expect(order?.outOfOrder).toBe(0);
      expect(order?.xacts).toBeGreaterThan(1);
    } finally {
      await target.end();
    }

    // A second copy into it is refused: it is not empty any more.
    const again = await cli(
      env(),
      s.dir,
      "migrate-data",
      "--from",
      dataDir,
      "--to",
      pg.url,
      "--apply",
    );
    expect(again.code).toBe(1);
    expect(again.err).toContain("is not empty (callers: 4");

    // A server on the target, with the same data directory (secret key, admin token).
    const targetEnv = { ...s.env, DATABASE_URL: pg.url };
    const server = await startServer(loadConfig(targetEnv, s.dir), silentLogger, targetEnv);
    try {
      const listed = await fetch(`${server.url}/a2a`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${peerSecret}`,
          "content-type": "application/json",
          "a2a-version": "1.0",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: taskId } }),
      });
      expect(listed.status).toBe(200);
      const task = (await listed.json()) as { result?: { id: string; status: { state: string } } };
      expect(task.result?.id).toBe(taskId);
      const withServer = { ...targetEnv, PEERGATE_URL: server.url };
      const runs = JSON.parse((await cli(withServer, s.dir, "runs", "list", "--json")).out);
      expect(runs.runs.map((run: { status: string }) => run.status)).toEqual([runStatus]);
      const gone = JSON.parse(
        (await cli(withServer, s.dir, "callers", "show", "gone", "--json")).out,
      );
      expect(gone.caller.revokedAt).not.toBeNull();
      // New events on the target chain after the copied ones.
      const added = await cli(
        withServer,
        s.dir,
        "callers",
        "add",
        "after-move",
        "--kind",
        "peer",
        "--json",
      );
      expect(added.code, added.err).toBe(0);

      // While that server runs, the PostgreSQL side is served: refused as a source.
      const served = await cli(
        env(),
        s.dir,
        "migrate-data",
        "--from",
        pg.url,
        "--to",
        path.join(s.dir, "back"),
      );
      expect(served.code).toBe(1);
      expect(served.err).toContain("is being served");
    } finally {
      await server.stop();
    }
    const verified = await cli(targetEnv, s.dir, "audit", "verify", "--json");
    expect(verified.code, verified.out + verified.err).toBe(0);
    const verify = JSON.parse(verified.out) as { ok: boolean; count: number };
    expect(verify.ok).toBe(true);
    expect(verify.count).toBeGreaterThan(sourceAuditCount);
  }, 240_000);

  it("copies back into a new embedded data directory, where the chain still verifies", async () => {
    const back = path.join(s.dir, "back");
    const backEnv = { ...s.env, PEERGATE_DATA_DIR: back, PEERGATE_URL: "http://127.0.0.1:9" };
    const unmigrated = await cli(backEnv, s.dir, "migrate-data", "--from", pg.url, "--to", back);
    expect(unmigrated.code).toBe(1);
    expect(unmigrated.err).toContain(`PEERGATE_DATA_DIR=${back} peergate migrate`);
    expect((await cli(backEnv, s.dir, "migrate")).code).toBe(0);
    const r = await cli(backEnv, s.dir, "migrate-data", "--from", pg.url, "--to", back, "--apply");
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("every table's count matches");
    expect(r.out).toMatch(/callers\s+5\s+5/);
    const verified = await cli(backEnv, s.dir, "audit", "verify", "--json");
    expect(verified.code, verified.out + verified.err).toBe(0);
    expect(JSON.parse(verified.out).ok).toBe(true);
  }, 240_000);
});
