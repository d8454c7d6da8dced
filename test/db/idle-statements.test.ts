// An idle instance sends at most one SQL statement per second on average (issue 26), on PGlite
// and on PostgreSQL. Time is not measured: the window is counted in the run sweeper's beats
// (5 s apart by default), recognised by the one statement each beat always sends (the orphaned-run
// SELECT), and the bound is one statement per second of those beats. A loaded machine fires every
// timer late, the sweeper's with the others, so it can only send fewer statements per beat.
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import type { RecordedStatement } from "../../src/db/round-trips.ts";
import { silentLogger } from "../../src/log.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { copyPolicies, createSharedSecrets, instanceEnv } from "../faults/support.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { eventuallyValue } from "../support/eventually.ts";

/** The sweeper's period (src/runs/run-core.ts default), in seconds. */
const beatSeconds = 5;
/** Issue 26's bound. */
const statementsPerSecond = 1;
/** Beats left out first: start-up and the pollers' quick first looks after it. */
const settleBeats = 2;
const measuredBeats = 3;

/** The orphaned-run SELECT, sent once every beat (src/runs/sweeper.ts). */
const isBeat = (statement: RecordedStatement) =>
  /^select .* from "runs" where .*"heartbeat_at" </.test(statement.sql);

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function startIdle(databaseUrl: string | undefined): Promise<RunningServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "peergate-idle-"));
  const policiesDir = await copyPolicies();
  cleanups.push(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(policiesDir, { recursive: true, force: true });
  });
  const env = instanceEnv({
    ...createSharedSecrets(),
    policiesDir,
    modelBaseUrl: "http://127.0.0.1:9/v1",
    dataDir: path.join(dir, "data"),
    ...(databaseUrl ? { databaseUrl } : {}),
  });
  const config = { ...loadConfig(env, dir), countRoundTrips: true };
  const server = await startServer(config, silentLogger, env);
  cleanups.push(() => server.stop());
  return server;
}

async function countIdleBeats(server: RunningServer) {
  const counter = server.database.roundTrips;
  if (!counter) throw new Error("the server was opened without counting");
  const stopRecording = counter.record();
  const beats = () => stopRecording.peek().filter(isBeat).length;
  // Polled, not timed: the window ends when the sweeper has beaten often enough.
  await eventuallyValue(
    `${settleBeats + measuredBeats} sweeper beats`,
    beats,
    (n) => n >= settleBeats + measuredBeats,
    { withinMs: 120_000, everyMs: 200 },
  );
  const all = stopRecording();
  const beatIndexes = all.flatMap((s, i) => (isBeat(s) ? [i] : []));
  const from = beatIndexes[settleBeats - 1] as number;
  const to = beatIndexes[settleBeats + measuredBeats - 1] as number;
  // The statements after the settling beat, up to and including the last measured beat.
  return all.slice(from + 1, to + 1);
}

const kinds = [
  { kind: "pglite", skip: undefined },
  { kind: "postgres", skip: postgresSkipReason() },
] as const;

for (const { kind, skip } of kinds) {
  describe.skipIf(skip !== undefined)(
    `an idle instance [${kind}]${skip ? ` — ${skip}` : ""}`,
    () => {
      it(`sends at most ${statementsPerSecond} statement per second, counted over ${measuredBeats} sweeper beats`, async () => {
        let url: string | undefined;
        if (kind === "postgres") {
          const created = await createPostgresTestDatabase({ migrate: true });
          cleanups.push(() => created.drop());
          url = created.url;
        }
        const server = await startIdle(url);
        const window = await countIdleBeats(server);
        const bound = measuredBeats * beatSeconds * statementsPerSecond;
        expect(
          window.length,
          `statements over ${measuredBeats} beats:\n${window.map((s) => s.sql.slice(0, 100)).join("\n")}`,
        ).toBeLessThanOrEqual(bound);
      }, 180_000);
    },
  );
}
