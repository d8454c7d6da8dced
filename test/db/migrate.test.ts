import fs from "node:fs";
import path from "node:path";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { selectRows } from "../../src/db/client.ts";
import { migrateDatabase, migrationStatus, migrationsFolder } from "../../src/db/migrate.ts";
import { describeEachDatabase } from "../support/databases.ts";

const journal = JSON.parse(
  fs.readFileSync(path.join(migrationsFolder, "meta", "_journal.json"), "utf8"),
) as { entries: { tag: string }[] };
const allTags = journal.entries.map((e) => e.tag);

describe("the migrations folder", () => {
  it("is found from the module, not the working directory", () => {
    expect(allTags.length).toBeGreaterThan(0);
  });
});

describeEachDatabase(
  "migrations",
  (ctx) => {
    it("reports everything pending on an empty database", async () => {
      expect(await migrationStatus(ctx.database)).toEqual({
        expected: allTags.length,
        applied: 0,
        pending: allTags,
      });
    });

    it("applies every migration from empty, then nothing the second time", async () => {
      const first = await migrateDatabase(ctx.database);
      expect(first).toEqual({ applied: allTags.length, migrations: allTags });
      expect(await migrationStatus(ctx.database)).toEqual({
        expected: allTags.length,
        applied: allTags.length,
        pending: [],
      });
      expect(await migrateDatabase(ctx.database)).toEqual({ applied: 0, migrations: [] });

      const tables = await selectRows<{ name: string }>(
        ctx.db,
        sql`select table_name as name from information_schema.tables where table_schema = 'public' order by 1`,
      );
      expect(tables.map((t) => t.name)).toEqual(
        expect.arrayContaining([
          "audit_events",
          "callers",
          "credentials",
          "runs",
          "webhook_deliveries",
        ]),
      );
    });
  },
  { migrate: false },
);
