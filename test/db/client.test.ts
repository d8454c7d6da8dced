import net from "node:net";
import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { type Database, openDatabase, selectRows } from "../../src/db/client.ts";
import { UnavailableError } from "../../src/errors.ts";
import {
  createPostgresTestDatabase,
  describeEachDatabase,
  postgresSkipReason,
} from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";

async function pickFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve((address as net.AddressInfo).port));
    });
  });
}

/** The same server, the `postgres` maintenance database. */
function adminUrlOf(url: string): string {
  const admin = new URL(url);
  admin.pathname = "/postgres";
  return admin.toString();
}

/**
 * The work fails closed with UnavailableError (whose message says why). How long that took is a
 * benchmark's question, not a test's: a ping that ignored its deadline would hang the test.
 */
async function expectUnavailable(work: Promise<unknown>, message?: RegExp): Promise<void> {
  await expect(work).rejects.toBeInstanceOf(UnavailableError);
  if (message) await expect(work).rejects.toThrow(message);
}

describeEachDatabase("database client", (ctx) => {
  it("answers ping and runs queries through drizzle", async () => {
    await ctx.database.ping();
    const rows = await selectRows<{ n: number }>(ctx.db, sql`select 41 + 1 as n`);
    expect(rows).toEqual([{ n: 42 }]);
  });

  it("fails ping closed once the database is closed, and close is idempotent", async () => {
    await ctx.database.close();
    await ctx.database.close();
    await expectUnavailable(ctx.database.ping(500), /closed/);
  });

  it("delivers notifications to listeners until they unlisten", async () => {
    const received: string[] = [];
    let listening = 0;
    const unlisten = await ctx.database.listen(
      "peergate_test",
      (payload) => received.push(payload),
      () => {
        listening += 1;
      },
    );
    expect(listening).toBe(1);
    // A listener on another channel, told after: once it has heard, so would the first have.
    const after: string[] = [];
    await ctx.database.listen("peergate_test_after", (payload) => after.push(payload));
    await ctx.database.notify("peergate_test", "caller:1 revoked");
    await eventually("the first notification", () => received.length === 1);
    await unlisten();
    await ctx.database.notify("peergate_test", "after unlisten");
    await ctx.database.notify("peergate_test_after", "told after");
    await eventually("the later listener to hear", () => after.length === 1);
    expect(received).toEqual(["caller:1 revoked"]);
  });

  it("refuses channel names the two drivers would read differently", async () => {
    await expect(ctx.database.listen("Bad-Name", () => {})).rejects.toThrow(/channel/);
    await expect(ctx.database.notify('x"; drop table callers; --', "")).rejects.toThrow(/channel/);
  });

  it.runIf(ctx.kind === "postgres")("delivers a notification from another instance", async () => {
    const other = await ctx.openSecondConnection();
    const received: string[] = [];
    await ctx.database.listen("peergate_revocations", (p) => received.push(p));
    await other.notify("peergate_revocations", "caller:7");
    await eventually("the other instance's notification", () => received.length === 1);
    expect(received).toEqual(["caller:7"]);
  });

  it.runIf(ctx.kind === "postgres")(
    "re-listens after losing its connection, and says so through onListen",
    async () => {
      const name = new URL(ctx.url ?? "").pathname.slice(1);
      const admin = await openDatabase({ kind: "postgres", url: adminUrlOf(ctx.url ?? "") });
      try {
        const listens: number[] = [];
        const received: string[] = [];
        await ctx.database.listen(
          "peergate_revocations",
          (p) => received.push(p),
          () => listens.push(listens.length + 1),
        );
        // Cut every connection and refuse new ones for a moment, as a restart would.
        await admin.db.execute(sql.raw(`alter database "${name}" allow_connections false`));
        await admin.db.execute(
          sql.raw(
            `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}'`,
          ),
        );
        // Refused until every old connection is gone, as a restart would: then allowed again.
        await eventually("every connection to the database to be cut", async () => {
          const [left] = await selectRows<{ n: number }>(
            admin.db,
            sql`select count(*)::int as n from pg_stat_activity where datname = ${name}`,
          );
          return left?.n === 0;
        });
        await admin.db.execute(sql.raw(`alter database "${name}" allow_connections true`));
        await eventually("the listener to listen again", () => listens.length >= 2);
        const other = await ctx.openSecondConnection();
        await other.notify("peergate_revocations", "caller:9");
        await eventually("the notification after the reconnect", () => received.length === 1);
        expect(received).toEqual(["caller:9"]);
      } finally {
        await admin.close();
      }
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "fails ping closed when its database disappears from the server",
    async () => {
      const admin = await openDatabase({ kind: "postgres", url: adminUrlOf(ctx.url ?? "") });
      try {
        await ctx.database.ping();
        await admin.db.execute(
          sql.raw(`drop database "${new URL(ctx.url ?? "").pathname.slice(1)}" with (force)`),
        );
        await expectUnavailable(ctx.database.ping(1_000));
      } finally {
        await admin.close();
      }
    },
  );
});

describe("postgres driver against a dead or hung server", () => {
  const opened: Database[] = [];
  const servers: net.Server[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((d) => d.close()));
    for (const s of servers.splice(0)) s.close();
  });

  it("rejects ping with UnavailableError when nothing listens on the port", async () => {
    const port = await pickFreePort();
    const database = await openDatabase({
      kind: "postgres",
      url: `postgres://postgres@127.0.0.1:${port}/peergate`,
    });
    opened.push(database);
    await expectUnavailable(database.ping(1_000));
  });

  it("rejects ping within its timeout when the server accepts but never answers", async () => {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => sockets.push(socket));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as net.AddressInfo;
    const database = await openDatabase({
      kind: "postgres",
      url: `postgres://postgres@127.0.0.1:${port}/peergate`,
    });
    opened.push(database);
    // Its own deadline ended it, not a connection error or the driver's connect timeout.
    await expectUnavailable(database.ping(300), /did not answer within 300 ms/);
    for (const s of sockets) s.destroy();
  });
});

describe.skipIf(postgresSkipReason() !== undefined)("two instances on one PostgreSQL", () => {
  it("each opens its own pool; closing one leaves the other working", async () => {
    const created = await createPostgresTestDatabase();
    try {
      const a = await openDatabase({ kind: "postgres", url: created.url });
      const b = await openDatabase({ kind: "postgres", url: created.url });
      await a.close();
      await b.ping();
      await b.close();
    } finally {
      await created.drop();
    }
  });
});
