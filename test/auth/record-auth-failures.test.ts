// Failed authentications are audited as one summary per window and source network: counted in
// memory, written when the window closes or at close (shutdown), never one event per failure.
import { expect, it } from "vitest";
import { auditEvents } from "../../src/db/schema.ts";
import { createLogger } from "../../src/log.ts";
import { createAuthFailureLog } from "../../src/services/record-auth-failures.ts";
import { describeEachDatabase } from "../support/databases.ts";

describeEachDatabase("the failed-authentication summary", (t) => {
  const logger = createLogger({ level: "error", write: () => {} });
  const readSummaries = async () =>
    (await t.db.select().from(auditEvents)).filter((e) => e.kind === "auth.failed");

  it("writes one event per window and network, with counts, kinds, names and first/last", async () => {
    let now = 1_000_000;
    const log = createAuthFailureLog({
      db: t.db,
      logger,
      windowMs: 60_000,
      checkEveryMs: 0,
      nowMs: () => now,
    });
    for (let i = 0; i < 300; i++) {
      log.record({
        surface: i % 2 ? "a2a" : "github",
        // Two IPv6 hosts of one /64 count as one source; the IPv4 one is another.
        source:
          i % 3 === 0 ? "2001:db8:1:2::7" : i % 3 === 1 ? "2001:db8:1:2:ffff::9" : "192.0.2.5",
        reason: i % 2 ? "unknown-secret" : "signature-mismatch",
        credentialKind: i % 2 ? "peer-token" : "github-signature",
        claimedName: i % 2 ? undefined : "repo",
      });
      now += 10;
    }
    await log.flushClosed();
    expect(await readSummaries()).toEqual([]);
    now += 60_000;
    await log.flushClosed();
    const events = await readSummaries();
    expect(events).toHaveLength(2);
    const v6 = events.find((e) => (e.data as { source: string }).source === "2001:db8:1:2::/64");
    expect(v6?.data).toMatchObject({ count: 200, first: new Date(1_000_000).toISOString() });
    const v4 = events.find((e) => (e.data as { source: string }).source === "192.0.2.5");
    expect(v4?.data).toMatchObject({
      count: 100,
      surfaces: { a2a: 50, github: 50 },
      reasons: { "unknown-secret": 50, "signature-mismatch": 50 },
      credentialKinds: { "peer-token": 50, "github-signature": 50 },
      claimedNames: { repo: 50 },
      first: new Date(1_000_020).toISOString(),
      last: new Date(1_000_000 + 2990).toISOString(),
    });
    await log.close();
    expect(await readSummaries()).toHaveLength(2);
  });

  it("loses nothing: the open window is written at close, and the oldest when too many are open", async () => {
    let now = 0;
    const log = createAuthFailureLog({
      db: t.db,
      logger,
      windowMs: 60_000,
      checkEveryMs: 0,
      maxOpen: 2,
      nowMs: () => now,
    });
    const fail = (source: string) =>
      log.record({
        surface: "a2a",
        source,
        reason: "unknown-secret",
        credentialKind: "peer-token",
      });
    fail("198.51.100.1");
    fail("198.51.100.2");
    fail("198.51.100.3"); // the first window is written early
    now += 1;
    fail("198.51.100.3");
    await log.flushClosed();
    expect((await readSummaries()).map((e) => (e.data as { source: string }).source)).toEqual([
      "198.51.100.1",
    ]);
    await log.close();
    const counts = Object.fromEntries(
      (await readSummaries()).map((e) => {
        const data = e.data as { source: string; count: number };
        return [data.source, data.count];
      }),
    );
    expect(counts).toEqual({ "198.51.100.1": 1, "198.51.100.2": 1, "198.51.100.3": 2 });
  });

  it("keeps a claimed name from request text as data, whatever it spells", async () => {
    const log = createAuthFailureLog({ db: t.db, logger, checkEveryMs: 0 });
    for (const name of ["constructor", "__proto__", "toString"]) {
      log.record({
        surface: "webhook",
        source: "203.0.113.9",
        reason: "unknown-secret",
        credentialKind: "webhook-token",
        claimedName: name,
      });
    }
    await log.close();
    const [event] = await readSummaries();
    expect(event?.data).toMatchObject({ count: 3 });
    const data = (event?.data ?? {}) as { claimedNames?: object };
    expect(Object.keys(data.claimedNames ?? {}).sort()).toEqual([
      "__proto__",
      "constructor",
      "toString",
    ]);
  });
});
