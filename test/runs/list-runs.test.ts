// The admin's list of runs, newest first, paged by the last row seen: runs started in the same
// millisecond share a createdAt, and a page must end exactly after its last row, so paging loses
// none of them and shows none twice.
import { sql } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import { listRunsQuerySchema } from "../../src/services/decide-run.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { insertCaller, runToEnd, scriptModel, startEngine, stopEngines } from "./support.ts";

describeEachDatabase("the list of runs", (ctx) => {
  afterEach(stopEngines);

  it("pages runs that share a createdAt without losing or repeating one", async () => {
    const caller = await insertCaller(ctx.database, {});
    const model = scriptModel([{ text: "done" }]);
    const { engine } = await startEngine(ctx.database, { model });
    const started: string[] = [];
    for (let i = 0; i < 7; i++) started.push((await runToEnd(engine, caller)).runId);
    // Five of them in one millisecond, as a burst of starts can be: the newest, so the first page
    // ends inside that millisecond.
    await ctx.db.execute(
      sql`update runs set created_at = now() + interval '1 hour'
           where id = any(${`{${started.slice(1, 6).join(",")}}`}::uuid[])`,
    );

    const seen: string[] = [];
    let cursor: { before: Date; beforeId: string } | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await engine.listRuns({ limit: 2, ...cursor });
      seen.push(...page.map((r) => r.id));
      const last = page.at(-1);
      if (page.length < 2 || !last) break;
      cursor = { before: new Date(last.createdAt), beforeId: last.id };
    }
    expect(seen).toHaveLength(started.length);
    expect(new Set(seen)).toEqual(new Set(started));

    // The time alone, as before: the three of that millisecond the first page did not show are
    // skipped; only the two older runs follow.
    const first = await engine.listRuns({ limit: 2 });
    const byTime = await engine.listRuns({ before: new Date(first[1]?.createdAt ?? "") });
    expect(new Set(byTime.map((r) => r.id))).toEqual(new Set([started[0], started[6]]));
  });

  it("takes beforeId only with before, and only a run id", () => {
    const id = "0b7e3c1e-8a4f-4c55-9d53-2f6f4c1a9e10";
    const issues = (query: unknown) =>
      listRunsQuerySchema.safeParse(query).error?.issues.map((i) => [i.path.join("."), i.message]);
    expect(issues({ beforeId: id })).toEqual([
      ["beforeId", "beforeId pages with before: pass the last run's createdAt as before too"],
    ]);
    expect(issues({ before: "2026-12-01T10:00:00.123Z", beforeId: "x" })?.[0]?.[0]).toBe(
      "beforeId",
    );
    expect(issues({ before: "2026-12-01T10:00:00.123Z", beforeId: id })).toBeUndefined();
  });
});
