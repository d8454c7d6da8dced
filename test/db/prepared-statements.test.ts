// drizzle's statements on real PostgreSQL run as named prepared statements (one round trip and no
// parse after a statement's first use on a connection), in and out of transactions, with the
// results unchanged.
import { and, eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { openDatabase, selectRows } from "../../src/db/client.ts";
import { callers } from "../../src/db/schema.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `prepared statements on PostgreSQL${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    it("prepares a parametrised statement on the connection that runs it, and reuses it", async () => {
      const created = await createPostgresTestDatabase({ migrate: true });
      const database = await openDatabase({ kind: "postgres", url: created.url });
      try {
        await database.db.insert(callers).values({ name: "prepared-one", kind: "peer" });
        const seen = await database.db.transaction(async (tx) => {
          const find = (name: string) =>
            tx
              .select({ name: callers.name })
              .from(callers)
              .where(and(eq(callers.name, name), eq(callers.kind, "peer")));
          expect(await find("prepared-one")).toEqual([{ name: "prepared-one" }]);
          expect(await find("nobody")).toEqual([]);
          // pg_prepared_statements is per session: this transaction's connection.
          return selectRows<{ statement: string; generic: number; custom: number }>(
            tx,
            sql`select statement, generic_plans::int as generic, custom_plans::int as custom
                  from pg_prepared_statements
                 where statement like ${'%from "callers"%'} and from_sql = false`,
          );
        });
        // One statement, prepared once, planned for both executions.
        expect(seen).toHaveLength(1);
        expect(seen[0]?.statement).toContain('where ("callers"."name" = $1');
        expect((seen[0]?.generic ?? 0) + (seen[0]?.custom ?? 0)).toBe(2);
      } finally {
        await database.close();
        await created.drop();
      }
    });
  },
);
