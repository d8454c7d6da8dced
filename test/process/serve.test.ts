// `peergate serve` as an operator runs it: a real process, the embedded database in a data dir
// (and a real PostgreSQL), ready within seconds, data kept across a restart, and a clean exit 0
// on SIGTERM and SIGINT.
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { mainScript, type ServeChild, spawnServeChild } from "../support/serve-process.ts";

async function startServe(env: Record<string, string>): Promise<ServeChild> {
  return spawnServeChild({ PATH: process.env.PATH ?? "", ...env });
}

async function stop(
  started: ServeChild,
  signal: NodeJS.Signals,
): Promise<{ code: number | string }> {
  started.child.kill(signal);
  return { code: await started.exited };
}

const variants = [
  { kind: "pglite", skip: undefined as string | undefined },
  { kind: "postgres", skip: postgresSkipReason() },
];

for (const variant of variants) {
  describe.skipIf(variant.skip !== undefined)(`peergate serve (${variant.kind})`, () => {
    let dir: string;
    let env: Record<string, string>;
    let drop: (() => Promise<void>) | undefined;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "peergate-serve-"));
      env = {
        PEERGATE_DATA_DIR: path.join(dir, "data"),
        // The default (./workspace) would be made in the repository the tests run from.
        PEERGATE_WORKSPACE: path.join(dir, "workspace"),
        PEERGATE_POLICIES_DIR: repoPoliciesDir,
        PEERGATE_PORT: "0",
      };
      if (variant.kind === "postgres") {
        const db = await createPostgresTestDatabase();
        env.DATABASE_URL = db.url;
        drop = db.drop;
      }
    });
    afterAll(async () => {
      await drop?.();
      await rm(dir, { recursive: true, force: true });
    });

    // How fast it starts and stops is a benchmark's to say (bench/), not a test's on a loaded
    // machine: this says that it becomes ready, keeps its data and stops cleanly.
    it("becomes ready, keeps its data across a restart, and exits 0 on SIGTERM/SIGINT", async () => {
      const first = await startServe(env);
      const ready = await fetch(`${first.url}/readyz`);
      expect(ready.status).toBe(200);
      const token = (
        await readFile(path.join(env.PEERGATE_DATA_DIR as string, "admin-token"), "utf8")
      ).trim();
      const created = await fetch(`${first.url}/admin/v1/callers`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "kept", kind: "peer" }),
      });
      expect(created.status).toBe(201);
      const stopped = await stop(first, "SIGTERM");
      expect(stopped.code).toBe(0);
      expect(first.logs.join("\n")).not.toContain(token);

      const second = await startServe(env);
      const show = await fetch(`${second.url}/admin/v1/callers/kept`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(show.status).toBe(200);
      const again = await stop(second, "SIGINT");
      expect(again.code).toBe(0);
    });

    it("stops at once with a clear message when the configuration is bad", async () => {
      const child = spawn(process.execPath, [mainScript, "serve"], {
        env: {
          PATH: process.env.PATH ?? "",
          ...env,
          PEERGATE_PORT: "99999",
          PEERGATE_LOG_LEVEL: "loud",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr?.on("data", (c: Buffer) => {
        stderr += c.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code).toBe(1);
      expect(stderr).toContain('PEERGATE_PORT="99999"');
      expect(stderr).toContain('PEERGATE_LOG_LEVEL="loud"');
    });
  });
}
