// The notification hub: one LISTEN per channel however many subscribe, typed messages, a heartbeat
// that says whether notifications arrive, and a gap reported whenever messages may have been lost.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { type Database, openDatabase, selectRows } from "../../src/db/client.ts";
import { type Channel, openNotifications } from "../../src/db/notifications.ts";
import { silentLogger } from "../../src/log.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";

const numbers: Channel<{ n: number }> = {
  name: "peergate_test_numbers",
  parse(payload) {
    const n = Number(payload);
    return Number.isInteger(n) ? { n } : undefined;
  },
  format: (message) => String(message.n),
};

function countingListens(database: Database): { database: Database; channels: string[] } {
  const channels: string[] = [];
  return {
    database: {
      ...database,
      listen(channel, onPayload, onListen) {
        channels.push(channel);
        return database.listen(channel, onPayload, onListen);
      },
    },
    channels,
  };
}

describeEachDatabase("notification hub", (ctx) => {
  it("LISTENs once per channel and hands every subscriber the parsed messages", async () => {
    const counted = countingListens(ctx.database);
    const hub = await openNotifications({ database: counted.database, logger: silentLogger });
    try {
      const first: number[] = [];
      const second: number[] = [];
      const stopFirst = await hub.subscribe(numbers, (m) => first.push(m.n));
      await hub.subscribe(numbers, (m) => second.push(m.n));
      await hub.publish(numbers, { n: 1 });
      await ctx.database.notify(numbers.name, "not a number");
      await hub.publish(numbers, { n: 2 });
      await eventually("the second subscriber to get two messages", () => second.length === 2);
      expect(first).toEqual([1, 2]);
      expect(second).toEqual([1, 2]);
      await stopFirst();
      await hub.publish(numbers, { n: 3 });
      await eventually("the second subscriber to get the third message", () => second.length === 3);
      expect(first).toEqual([1, 2]);
      expect(counted.channels.sort()).toEqual(["peergate_heartbeat", numbers.name].sort());
      await eventually("the hub to be healthy", () => hub.healthy);
    } finally {
      await hub.close();
    }
    expect(hub.healthy).toBe(false);
  });

  it("is unhealthy and reports a gap when its heartbeats stop coming back", async () => {
    let now = 0;
    const hub = await openNotifications({
      database: ctx.database,
      logger: silentLogger,
      heartbeatMs: 20,
      staleAfterMs: 1_000,
      clock: () => now,
    });
    try {
      let gaps = 0;
      hub.onGap(() => {
        gaps += 1;
      });
      await eventually("the hub to be healthy", () => hub.healthy);
      // Heartbeats keep being sent, but as far as the hub can tell none came back in time.
      now += 10_000;
      expect(hub.healthy).toBe(false);
      await eventually("a gap to be reported", () => gaps > 0);
    } finally {
      await hub.close();
    }
  });

  it("is never healthy when its notifications are lost", async () => {
    let sent = 0;
    const hub = await openNotifications({
      database: {
        ...ctx.database,
        notify: async () => {
          sent += 1;
        },
      },
      logger: silentLogger,
      heartbeatMs: 20,
      staleAfterMs: 1_000,
    });
    try {
      await eventually("three messages to be sent", () => sent >= 3);
      expect(hub.healthy).toBe(false);
    } finally {
      await hub.close();
    }
  });

  it.runIf(ctx.kind === "postgres")(
    "reports a gap after its connection is re-established",
    async () => {
      const name = new URL(ctx.url ?? "").pathname.slice(1);
      const admin = new URL(ctx.url ?? "");
      admin.pathname = "/postgres";
      const server = await openDatabase({ kind: "postgres", url: admin.toString() });
      const hub = await openNotifications({ database: ctx.database, logger: silentLogger });
      try {
        const received: number[] = [];
        await hub.subscribe(numbers, (m) => received.push(m.n));
        let gaps = 0;
        hub.onGap(() => {
          gaps += 1;
        });
        await server.db.execute(sql.raw(`alter database "${name}" allow_connections false`));
        await server.db.execute(
          sql.raw(
            `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}'`,
          ),
        );
        // Refused until every old connection is gone, as a restart would: then allowed again.
        await eventually("every connection to the database to be cut", async () => {
          const [left] = await selectRows<{ n: number }>(
            server.db,
            sql`select count(*)::int as n from pg_stat_activity where datname = ${name}`,
          );
          return left?.n === 0;
        });
        await server.db.execute(sql.raw(`alter database "${name}" allow_connections true`));
        await eventually("a gap to be reported", () => gaps > 0);
        await eventually("the hub to be healthy", () => hub.healthy);
        await hub.publish(numbers, { n: 7 });
        await eventually("message 7 to arrive", () => received.includes(7));
      } finally {
        await hub.close();
        await server.close();
      }
    },
  );
});
