// docs/operating.md, "Moving from the embedded database to PostgreSQL", run as written: a real
// `peergate serve` on the embedded database with one caller, the section's ```sh block (audit
// verify) against it; the server stopped; the first ```sh postgres block (migrate, migrate-data)
// with DATABASE_URL naming a fresh throwaway database; the server started again on it; then the
// second ```sh postgres block, whose CLI calls succeed only with that same admin token, and which
// finds the caller, its credential and the audit chain carried over; then a second instance on
// the same database, given that token
// and the secret key in its environment as "Several instances" says; last, with the servers
// stopped, the ```sh postgres block of "Backups" (pg_dump, pg_restore). Skipped without the test
// PostgreSQL cluster.

import { spawn } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { findPostgres } from "../support/postgres-cluster.ts";
import { mainScript, type ServeChild, spawnServeChild } from "../support/serve-process.ts";

const docFile = path.resolve(import.meta.dirname, "../../docs/operating.md");

function runBash(script: string, env: Record<string, string>, cwd: string) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn("bash", ["-euo", "pipefail", "-c", script], { env, cwd });
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.on("close", (code) => resolve({ code, out }));
  });
}

async function stop(server: ServeChild): Promise<void> {
  server.signalGroup("SIGTERM");
  await server.exited;
}

describe.skipIf(postgresSkipReason() !== undefined)(
  "docs/operating.md: moving from the embedded database to PostgreSQL",
  () => {
    let dir: string;
    let section: string;
    let doc: string;
    let drop: (() => Promise<void>) | undefined;
    let server: ServeChild | undefined;
    let env: Record<string, string>;
    beforeAll(async () => {
      doc = await readFile(docFile, "utf8");
      const start = doc.indexOf("## Moving from the embedded database to PostgreSQL");
      expect(start).toBeGreaterThan(0);
      section = doc.slice(start, doc.indexOf("\n## ", start + 1));
      dir = await mkdtemp(path.join(tmpdir(), "peergate-move-doc-"));
      const bin = path.join(dir, "bin");
      await mkdir(bin);
      await mkdir(path.join(dir, "home"));
      await writeFile(
        path.join(bin, "peergate"),
        `#!/bin/sh\nexec "${process.execPath}" "${mainScript}" "$@"\n`,
      );
      await chmod(path.join(bin, "peergate"), 0o755);
      env = {
        PATH: `${bin}:${process.env.PATH ?? ""}`,
        HOME: path.join(dir, "home"),
        PEERGATE_DATA_DIR: path.join(dir, "data"),
        PEERGATE_WORKSPACE: path.join(dir, "workspace"),
        PEERGATE_POLICIES_DIR: repoPoliciesDir,
        PEERGATE_SANDBOX: "none",
        // A model configured, as on a real install; `doctor --no-model-call` and these steps never
        // call it (nothing listens there).
        PEERGATE_MODEL: "openai-compatible:local-qwen",
        PEERGATE_MODEL_BASE_URL: "http://127.0.0.1:9/v1",
      };
    }, 60_000);
    afterAll(async () => {
      if (server) await stop(server);
      await drop?.();
      await rm(dir, { recursive: true, force: true, maxRetries: 5 });
    }, 120_000);

    it("keeps the admin token and the callers across the move, serves a second instance, restores a dump", async () => {
      const sh = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
      const pg = [...section.matchAll(/^```sh postgres\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
      expect({ sh: sh.length, pg: pg.length }).toEqual({ sh: 1, pg: 2 });

      // Before: the embedded database, with a caller to carry over.
      server = await spawnServeChild({ ...env, PEERGATE_PORT: "0" }, { readyMs: 180_000 });
      const cli = { ...env, PEERGATE_URL: server.url };
      const added = await runBash("peergate callers add mover --kind peer", cli, dir);
      expect(added).toMatchObject({ code: 0 });
      const before = await runBash(sh[0] as string, cli, dir);
      expect({ code: before.code, out: before.out }).toMatchObject({ code: 0 });
      const eventsBefore = Number(/audit chain intact: (\d+) events/.exec(before.out)?.[1]);
      expect(eventsBefore).toBeGreaterThan(0);
      const adminToken = (await readFile(path.join(dir, "data/admin-token"), "utf8")).trim();
      await stop(server);
      server = undefined;

      // The move: a new, empty PostgreSQL database.
      const database = await createPostgresTestDatabase({ migrate: false });
      drop = database.drop;
      const moved = { ...env, DATABASE_URL: database.url };
      const migrated = await runBash(pg[0] as string, moved, dir);
      expect({ code: migrated.code, out: migrated.out }).toMatchObject({ code: 0 });
      expect(migrated.out).toContain("dry run: nothing copied");
      expect(migrated.out).toContain("every table's count matches");

      server = await spawnServeChild({ ...moved, PEERGATE_PORT: "0" }, { readyMs: 180_000 });
      // The file is untouched: the operator's token is the one they had.
      expect((await readFile(path.join(dir, "data/admin-token"), "utf8")).trim()).toBe(adminToken);

      const after = await runBash(pg[1] as string, { ...moved, PEERGATE_URL: server.url }, dir);
      expect({ code: after.code, out: after.out }).toMatchObject({ code: 0 });
      // The caller came over with its credential; the chain verifies with every event before it;
      // doctor found the database migrated and the admin token known to it.
      expect(after.out).toMatch(/^mover +peer +public +active/m);
      const eventsAfter = Number(/audit chain intact: (\d+) events/.exec(after.out)?.[1]);
      expect(eventsAfter).toBeGreaterThanOrEqual(eventsBefore);
      expect(after.out).toMatch(/^OK +admin token +from .*admin-token$/m);
      expect(after.out).toMatch(/^OK +database +reachable/m);

      // "Several instances on one PostgreSQL": a second one, with its own data directory, given
      // the first one's admin token and secret key in its environment, answers that admin token.
      await mkdir(path.join(dir, "second"));
      const second = await spawnServeChild(
        {
          ...moved,
          PEERGATE_DATA_DIR: path.join(dir, "second/data"),
          PEERGATE_WORKSPACE: path.join(dir, "second/workspace"),
          PEERGATE_ADMIN_TOKEN: adminToken,
          PEERGATE_SECRET_KEY: (await readFile(path.join(dir, "data/secret-key"), "utf8")).trim(),
          PEERGATE_PORT: "0",
        },
        { readyMs: 180_000 },
      );
      try {
        const listed = await runBash(
          "peergate callers list",
          { ...moved, PEERGATE_ADMIN_TOKEN: adminToken, PEERGATE_URL: second.url },
          dir,
        );
        expect({ code: listed.code, out: listed.out }).toMatchObject({ code: 0 });
        expect(listed.out).toMatch(/^mover +peer +public +active/m);
      } finally {
        await stop(second);
      }
      await stop(server);
      server = undefined;

      // "Backups": pg_dump and pg_restore from the PostgreSQL installation the test cluster runs.
      const backups = doc.slice(
        doc.indexOf("## Backups"),
        doc.indexOf("\n## ", doc.indexOf("## Backups") + 1),
      );
      const [backup] = [...backups.matchAll(/^```sh postgres\n([\s\S]*?)^```$/gm)].map(
        (m) => m[1] ?? "",
      );
      const installation = findPostgres();
      if (!("binDir" in installation)) throw new Error(installation.unavailable);
      const withTools = { ...moved, PATH: `${installation.binDir}:${env.PATH}` };
      const restored = await runBash(backup as string, withTools, dir);
      expect({ code: restored.code, out: restored.out }).toMatchObject({ code: 0 });
      const checked = await runBash("peergate doctor --no-model-call", withTools, dir);
      expect(checked.out).toMatch(/^OK +database +reachable, \d+ migrations applied/m);
    }, 600_000);
  },
);
