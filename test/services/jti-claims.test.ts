// A peer JWT's jti is claimed once (src/services/jti-claims.ts), with concurrent claims grouped
// into one statement. What must hold: a jti is accepted once however many requests race with it,
// on one instance or two; a claim answers only after its group committed; a failed group lets no
// request through; and a busy server sends one statement per group, not per request.
import { sql } from "drizzle-orm";
import { expect, it } from "vitest";
import { selectRows } from "../../src/db/client.ts";
import { createJtiClaimer } from "../../src/services/jti-claims.ts";
import { describeEachCountedDatabase } from "../support/databases.ts";

const later = () => new Date(Date.now() + 3_600_000);

describeEachCountedDatabase("jti claims", (ctx) => {
  it("accepts each jti once, a repeat of it never, and groups concurrent claims", async () => {
    const claimer = createJtiClaimer(ctx.db, () => new Date());
    const before = ctx.database.roundTrips?.read().statements;
    const first = await Promise.all(
      Array.from({ length: 50 }, (_, i) => claimer.claim("issuer-a", `jti-${i}`, later())),
    );
    const statements =
      before === undefined ? undefined : (ctx.database.roundTrips?.read().statements ?? 0) - before;
    expect(first).toEqual(Array(50).fill(true));
    // The first claim went out alone; the 49 that came while it was in flight went as one group
    // (plus, now and then, a sweep of expired claims).
    if (statements !== undefined) expect(statements).toBeLessThanOrEqual(4);
    const again = await Promise.all(
      Array.from({ length: 50 }, (_, i) => claimer.claim("issuer-a", `jti-${i}`, later())),
    );
    expect(again).toEqual(Array(50).fill(false));
    // The same jti from another issuer is another token.
    expect(await claimer.claim("issuer-b", "jti-0", later())).toBe(true);
    const rows = await selectRows<{ n: number }>(
      ctx.db,
      sql`select count(*)::int as n from jwt_replays`,
    );
    expect(rows[0]?.n).toBe(51);
  });

  it("lets exactly one of twenty requests racing with one jti through", async () => {
    const claimer = createJtiClaimer(ctx.db, () => new Date());
    // The first goes alone; the others are one group with the jti nineteen times.
    const results = await Promise.all(
      Array.from({ length: 20 }, () => claimer.claim("issuer-a", "raced", later())),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    // Nothing in flight: a group of only repeats.
    const repeats = await Promise.all(
      Array.from({ length: 5 }, () => claimer.claim("issuer-a", "raced-2", later())),
    );
    expect(repeats.filter(Boolean)).toHaveLength(1);
  });

  it.runIf(ctx.kind === "postgres")(
    "lets one request through when two instances race with the same jtis",
    async () => {
      const other = await ctx.openSecondConnection();
      const a = createJtiClaimer(ctx.db, () => new Date());
      const b = createJtiClaimer(other.db, () => new Date());
      const jtis = Array.from({ length: 40 }, (_, i) => `shared-${i}`);
      const [onA, onB] = await Promise.all([
        Promise.all(jtis.map((jti) => a.claim("issuer-a", jti, later()))),
        Promise.all(jtis.map((jti) => b.claim("issuer-a", jti, later()))),
      ]);
      for (let i = 0; i < jtis.length; i++) {
        expect([onA[i], onB[i]].filter(Boolean), jtis[i]).toHaveLength(1);
      }
    },
  );

  it("refuses every claim of a group the database did not take", async () => {
    const claimer = createJtiClaimer(ctx.db, () => new Date());
    await ctx.database.close();
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) => claimer.claim("issuer-a", `lost-${i}`, later())),
    );
    expect(results.map((r) => r.status)).toEqual(Array(5).fill("rejected"));
  });
});
