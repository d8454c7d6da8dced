// The embedded database's disk fills up under a running `peergate serve` (a real child process,
// PGlite in its data directory). Writes must fail with a clear answer — a problem with a code, and
// a log line that says what happened — while the process keeps serving (no crash, so no crash
// loop); and once there is space again the data directory opens, the audit chain verifies, and
// everything written before (and between) the failures is there.
//
// How the disk fills: the data directory lives on a small tmpfs mounted for the test (we run as
// root in CI and in sessions) and a filler file takes the rest of it, so PostgreSQL gets ENOSPC
// ("could not extend file … No space left on device", SQLSTATE 53100) and peergate answers 503
// `unavailable`. Where mounting is refused (a container without CAP_SYS_ADMIN), the test says so
// and simulates instead with a file-size limit on the server process (`ulimit -f`; Node ignores
// SIGXFSZ, so writes fail with EFBIG): the callers table is first grown past the limit, so adding
// a caller must extend a file beyond it. PostgreSQL reports that as an internal error (XX000, "File
// too large"), which peergate answers 500 `internal` and logs; the rest is checked the same way.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/db/client.ts";
import {
  addCaller,
  call,
  copyPolicies,
  createSharedSecrets,
  instanceEnv,
  type ScriptedModel,
  type ServeProcess,
  spawnServe,
  startScriptedModel,
  verifyAudit,
} from "./support.ts";

/** Mounts a tmpfs of `sizeMb` at `dir`, or says why it cannot. */
function mountTmpfs(dir: string, sizeMb: number): { ok: true } | { ok: false; why: string } {
  if (process.env.PEERGATE_TEST_DISK_FULL === "ulimit") {
    return { ok: false, why: "PEERGATE_TEST_DISK_FULL=ulimit" };
  }
  const result = spawnSync(
    "mount",
    ["-t", "tmpfs", "-o", `size=${sizeMb}m,mode=0700`, "tmpfs", dir],
    {
      encoding: "utf8",
      timeout: 10_000,
    },
  );
  if (result.status === 0) return { ok: true };
  return {
    ok: false,
    why: (result.stderr || result.error?.message || `mount exited ${result.status}`).trim(),
  };
}

/** Writes a file until the filesystem refuses; returns the bytes written. */
function fillDisk(file: string): number {
  const fd = fs.openSync(file, "w");
  let written = 0;
  try {
    for (const size of [1 << 20, 1 << 12]) {
      const chunk = Buffer.alloc(size, 1);
      try {
        for (;;) written += fs.writeSync(fd, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return written;
}

describe("the embedded database's disk fills up", () => {
  let root: string;
  let mountPoint: string;
  let mode: "tmpfs" | "ulimit" = "tmpfs";
  let model: ScriptedModel;
  let policiesDir: string;
  const processes: ServeProcess[] = [];

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "peergate-faults-disk-"));
    mountPoint = path.join(root, "disk");
    fs.mkdirSync(mountPoint);
    const mounted = mountTmpfs(mountPoint, 64);
    if (!mounted.ok) {
      mode = "ulimit";
      console.warn(
        `  disk-full test: cannot mount a tmpfs here (${mounted.why}); simulating a full disk with a file-size limit (ulimit -f) instead.`,
      );
    }
    model = await startScriptedModel();
    policiesDir = await copyPolicies();
  });

  afterAll(async () => {
    for (const p of processes) await p.kill();
    await model?.close();
    if (mode === "tmpfs") spawnSync("umount", ["-l", mountPoint], { timeout: 10_000 });
    await rm(root, { recursive: true, force: true });
    await rm(policiesDir, { recursive: true, force: true });
  });

  it("writes fail with a clear answer and log, the server keeps serving, and nothing is lost once there is space", async () => {
    const secrets = createSharedSecrets();
    const dataDir = path.join(mountPoint, "data");
    const env = instanceEnv({ dataDir, policiesDir, modelBaseUrl: model.baseUrl, ...secrets });
    // Callers (and their audit events) written before the disk fills.
    const first = await spawnServe(env, secrets.adminToken);
    processes.push(first);
    for (const name of ["before-1", "before-2"]) await addCaller(first, { name, kind: "peer" });
    const auditBefore = await verifyAudit(first);
    expect(auditBefore.ok).toBe(true);

    let full: ServeProcess;
    const filler = path.join(mountPoint, "filler");
    if (mode === "tmpfs") {
      full = first;
      expect(fillDisk(filler)).toBeGreaterThan(0);
    } else {
      // Grow the callers table past the limit the next server runs under (PGlite is one process
      // per data directory, so the server is stopped meanwhile).
      await first.stop();
      const db = await openDatabase({ kind: "pglite", dataDir: path.join(dataDir, "pg") });
      try {
        await db.db.execute(
          sql`insert into callers (name, kind) select 'pad-' || i, 'peer' from generate_series(1, 150000) i`,
        );
        const [row] = (
          (await db.db.execute(sql`select pg_relation_filepath('callers') as file`)) as unknown as {
            rows: { file: string }[];
          }
        ).rows;
        const limitKb =
          Math.ceil((await stat(path.join(dataDir, "pg", row?.file ?? ""))).size / 1024) + 16;
        expect(limitKb).toBeGreaterThan(16 * 1024); // above the 16 MiB WAL segments
        await db.close();
        full = await spawnServe(env, secrets.adminToken, {
          wrap: (argv) => ["bash", "-c", `ulimit -f ${limitKb} && exec "$@"`, "serve", ...argv],
        });
      } finally {
        await db.close();
      }
      processes.push(full);
    }

    // Add callers until the disk refuses (a row may still fit in a page already allocated).
    const answers: { status: number; code: string | undefined; detail: string | undefined }[] = [];
    const addedWhileFull: string[] = [];
    for (let i = 0; i < 300; i++) {
      const reply = await full.admin("POST", "/callers", { name: `during-${i}`, kind: "peer" });
      answers.push({ status: reply.status, code: reply.body?.code, detail: reply.body?.detail });
      if (reply.status === 201) addedWhileFull.push(`during-${i}`);
      else if (answers.filter((a) => a.status !== 201).length >= 3) break;
    }
    const refused = answers.filter((a) => a.status !== 201);
    expect(refused.length).toBeGreaterThanOrEqual(3);
    const expected =
      mode === "tmpfs"
        ? { status: 503, code: "unavailable", detail: "the database is out of disk space" }
        : { status: 500, code: "internal" };
    for (const answer of refused) expect(answer).toMatchObject(expected);
    // The operator's log says what happened.
    const logged = full.logs.join("\n");
    expect(logged).toMatch(mode === "tmpfs" ? /No space left on device/ : /File too large/);
    // Still serving: no crash, nothing to restart.
    expect(full.child.exitCode).toBeNull();
    expect((await call(`${full.url}/healthz`)).status).toBe(200);
    expect((await full.admin("GET", "/callers/before-1")).status).toBe(200);

    // Space comes back.
    let again: ServeProcess;
    if (mode === "tmpfs") {
      fs.rmSync(filler);
      const added = await full.admin("POST", "/callers", { name: "after-space", kind: "peer" });
      expect(added.status).toBe(201);
      again = full;
    } else {
      await full.stop();
      again = await spawnServe(env, secrets.adminToken);
      processes.push(again);
      expect(
        (await again.admin("POST", "/callers", { name: "after-space", kind: "peer" })).status,
      ).toBe(201);
    }
    // A clean stop and a fresh start on the same data directory: it opens, verifies, has it all.
    await again.stop();
    expect(await again.exited).toBe(0);
    const reopened = await spawnServe(env, secrets.adminToken);
    processes.push(reopened);
    const audit = await verifyAudit(reopened);
    expect(audit.ok).toBe(true);
    expect(audit.count).toBeGreaterThan(auditBefore.count);
    const exists = async (name: string) =>
      (await reopened.admin("GET", `/callers/${name}`)).status === 200;
    for (const name of ["before-1", "before-2", "after-space", ...addedWhileFull]) {
      expect(await exists(name), name).toBe(true);
    }
    for (const [i, answer] of answers.entries()) {
      if (answer.status !== 201) expect(await exists(`during-${i}`), `during-${i}`).toBe(false);
    }
    await reopened.stop();
  }, 300_000);
});
