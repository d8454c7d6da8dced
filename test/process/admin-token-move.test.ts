// Moving a data directory from the embedded database to PostgreSQL keeps the operator's admin
// token: the file's token is adopted, a second instance is told where the token is, and a file
// the database does not know is refused with advice that loses no token, and cannot replace the
// cluster's token.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { createLogger, silentLogger } from "../../src/log.ts";
import { startServer } from "../../src/server.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

const recordingLogger = () => {
  const lines: string[] = [];
  const logger = createLogger({ level: "info", write: (line) => lines.push(line) });
  return { logger, lines };
};

const adminStatus = async (url: string, token: string) =>
  (await fetch(`${url}/admin/v1/callers`, { headers: { authorization: `Bearer ${token}` } }))
    .status;

describe.skipIf(postgresSkipReason() !== undefined)(
  "the admin token across a move to PostgreSQL",
  () => {
    let dir: string;
    let databaseUrl: string;
    let drop: () => Promise<void>;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "peergate-move-"));
      ({ url: databaseUrl, drop } = await createPostgresTestDatabase());
    });
    afterAll(async () => {
      await drop?.();
      await rm(dir, { recursive: true, force: true });
    });

    const env = (dataDir: string, extra: Record<string, string> = {}) => ({
      PEERGATE_DATA_DIR: dataDir,
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
      PEERGATE_PORT: "0",
      PEERGATE_LOG_LEVEL: "silent",
      ...extra,
    });

    it("keeps the embedded database's token, tells a second instance where it is, never says delete", async () => {
      const first = path.join(dir, "first");
      // 1. The embedded database generates the token into the data directory.
      const embedded = await startServer(loadConfig(env(first), dir), silentLogger);
      const token = (await readFile(path.join(first, "admin-token"), "utf8")).trim();
      expect(await adminStatus(embedded.url, token)).toBe(200);
      await embedded.stop();

      // 2. The same data directory, now on PostgreSQL: the file's token is adopted, not replaced.
      const moved = recordingLogger();
      const onPostgres = await startServer(
        loadConfig(env(first, { DATABASE_URL: databaseUrl }), dir),
        moved.logger,
      );
      expect(await adminStatus(onPostgres.url, token)).toBe(200);
      expect((await readFile(path.join(first, "admin-token"), "utf8")).trim()).toBe(token);
      expect(moved.lines.join("\n")).toContain("adopted");

      // 3. A second instance on another data directory is told where the token is, and works
      //    with it in the environment.
      const second = path.join(dir, "second");
      const told = recordingLogger();
      const other = await startServer(
        loadConfig(env(second, { DATABASE_URL: databaseUrl }), dir),
        told.logger,
      );
      expect(told.lines.join("\n")).toContain("copy admin-token from the data directory");
      expect(await adminStatus(other.url, token)).toBe(200);
      await other.stop();

      // 4. A data directory whose file the database does not know: refused, with advice that keeps
      //    both tokens (and not "remove it").
      const third = path.join(dir, "third");
      const stale = await startServer(loadConfig(env(third), dir), silentLogger);
      await stale.stop();
      const refused = await startServer(
        loadConfig(env(third, { DATABASE_URL: databaseUrl }), dir),
        silentLogger,
      ).then(
        (s) => s.stop().then(() => "started"),
        (error: Error) =>
          String(
            (error as { problems?: { message: string }[] }).problems?.[0]?.message ?? error.message,
          ),
      );
      expect(refused).toContain("Put the cluster's token in the file");
      expect(refused).toContain("Keep the file");
      expect(await adminStatus(onPostgres.url, token)).toBe(200);

      // 5. The file's token cannot be made the cluster's by starting with it (that would lock out
      //    every other holder); the cluster's token in the environment starts the instance.
      const staleToken = (await readFile(path.join(third, "admin-token"), "utf8")).trim();
      const forced = await startServer(
        loadConfig(
          env(third, { DATABASE_URL: databaseUrl, PEERGATE_ADMIN_TOKEN: staleToken }),
          dir,
        ),
        silentLogger,
      ).then(
        (s) => s.stop().then(() => "started"),
        (error: Error) => error.message,
      );
      expect(forced).toContain("the admin token does not match the cluster's");
      expect(await adminStatus(onPostgres.url, token)).toBe(200);
      const joined = await startServer(
        loadConfig(env(third, { DATABASE_URL: databaseUrl, PEERGATE_ADMIN_TOKEN: token }), dir),
        silentLogger,
      );
      expect(await adminStatus(joined.url, token)).toBe(200);
      await joined.stop();
      await onPostgres.stop();
    }, 240_000);
  },
);
