// `peergate migrate-data`: copies everything peergate keeps from one database to another — the
// embedded PGlite of a data directory to a PostgreSQL database, or back — so that a move keeps
// callers with their credentials' hashes (nothing is re-issued), grants, runs, tasks and the
// audit chain, which still verifies on the target.
//
// The rules, each checked before a row is written:
// - the source is not being served: an embedded source is opened, which takes its data
//   directory's lock (a running server holds it); a PostgreSQL source must have no instance
//   whose heartbeat is fresh (a stopped server removes its row; a killed one's goes stale);
// - both databases carry exactly this peergate's migrations (same schema);
// - every table of the target is empty.
// The copy is one transaction on the target, so a failure leaves it empty. Each table is read in
// primary-key order, a batch at a time (keyset pagination: memory is bounded by one batch),
// as JSON rows that PostgreSQL itself turns back into typed rows on the target
// (`json_populate_recordset`), so both drivers see the same values to the microsecond and no
// column needs a converter here. Ids, timestamps and identity sequences are kept.
//
// The audit chain: the chainer orders events by the inserting transaction's id (`xact_id`), a
// counter of the source cluster that means nothing on the target. So the tail is chained on the
// source first (with --apply; the source is not served, so nothing holds it back), and the copies
// take ids below the copying transaction's, so below every id the target will hand out later:
// what the target's instances append then follows the copied head in the chain order. Each keeps
// its distance from the source's last one (`xactShift`), so events of one source transaction still
// share an id and the ids still rise with the chain: the admin's filtered pages walk a kind's events
// by xact_id and sort each transaction's few by seq, and a copy under one id would make them sort
// every copied event of that kind. `xact_id` is not hashed, so every copied link still verifies.
//
// One file over 500 lines on purpose: the refusals, the copy and the checks after it are one
// procedure whose guarantees (empty target, one transaction, equal counts) hold only together.
import { existsSync } from "node:fs";
import path from "node:path";
import { getTableName, is, type SQL, sql } from "drizzle-orm";
import { getTableConfig, PgTable } from "drizzle-orm/pg-core";
import { flushAuditChain, readUnchainedTail } from "../db/audit.ts";
import { type Database, type DbOrTx, openDatabase, selectRows } from "../db/client.ts";
import { migrationStatus } from "../db/migrate.ts";
import {
  checkDriverMended,
  describeDatabase,
  makeOwnerOnly,
  resolveDriverDir,
} from "../db/open-configured.ts";
import * as schema from "../db/schema.ts";
import type { Problem } from "../errors.ts";
import { ConfigError } from "../errors.ts";

/** One side of a move: an embedded data directory or a PostgreSQL URL. */
export type DataStore = { kind: "pglite"; dataDir: string } | { kind: "postgres"; url: string };

/**
 * Every table, parents before children (foreign keys hold at each insert). A table added to
 * src/db/schema.ts must be added here or to `derivedTables`: test/cli/migrate-data.test.ts
 * compares the two lists with the schema's tables.
 */
export const copiedTables = [
  schema.callers,
  schema.credentials,
  schema.callerPushHosts,
  schema.callerSlots,
  schema.dailyUsage,
  schema.instances,
  schema.runs,
  schema.toolCalls,
  schema.runNotices,
  schema.a2aTasks,
  schema.a2aTaskEvents,
  schema.webhookDeliveries,
  schema.pushConfigs,
  schema.pushDeliveries,
  schema.jwtReplays,
  schema.auditEvents,
  schema.auditChain,
  schema.auditCheckpoints,
] as const satisfies readonly PgTable[];

/**
 * Tables the target's own triggers fill as the copied rows arrive, never copied: `a2a_task_counts`
 * counts the copied tasks as they are inserted (drizzle/0016_task_counts.sql).
 */
export const derivedTables = [schema.a2aTaskCounts] as const satisfies readonly PgTable[];

/** Every table src/db/schema.ts declares (views excluded), by name. */
export function schemaTableNames(): string[] {
  const names: string[] = [];
  for (const value of Object.values(schema) as unknown[]) {
    if (is(value, PgTable)) names.push(getTableName(value));
  }
  return names.sort();
}

/**
 * Columns the copy writes from the source's value and the copy's shift: `audit_events.xact_id`
 * moves below the copying transaction's id, order and grouping kept (see the top of this file).
 */
const shifted: Record<string, readonly string[]> = { audit_events: ["xact_id"] };

/** A heartbeat younger than this means an instance is serving (runs treat 30 s as orphaned). */
const liveHeartbeatMs = 30_000;

export type TableCount = { table: string; source: number; target?: number };

export type MigrateDataResult = {
  apply: boolean;
  from: string;
  to: string;
  /** How many migrations both databases carry (all of this peergate's). */
  migrations: number;
  tables: TableCount[];
  /** Audit events the source had not chained yet (chained there before copying, with apply). */
  unchainedAudit: number;
  /** Identity sequences set on the target: table.column → next value's predecessor. */
  sequences: Record<string, number>;
};

export type MigrateDataInput = {
  from: DataStore;
  to: DataStore;
  apply: boolean;
  /** Rows per read; memory holds about one batch. Default 500. */
  batchRows?: number;
  /** A line of progress (a table done, or every few batches of a long one). */
  onProgress?: (line: string) => void;
};

/** Reads `--from`/`--to`: a postgres:// URL, or an embedded data directory. */
export function parseDataStore(text: string): DataStore {
  if (/^postgres(ql)?:\/\//i.test(text)) return { kind: "postgres", url: text };
  return { kind: "pglite", dataDir: text };
}

/** A description without the password. */
export function describeStore(store: DataStore): string {
  return describeDatabase(
    store.kind === "pglite"
      ? { kind: "pglite", dataDir: pgliteDir(store.dataDir) }
      : { kind: "postgres", url: store.url },
  );
}

/** `<data dir>/pg`, as the server opens it; a directory that is itself a cluster is taken as is. */
function pgliteDir(dataDir: string): string {
  const resolved = path.resolve(dataDir);
  if (existsSync(path.join(resolved, "PG_VERSION"))) return resolved;
  return path.join(resolved, "pg");
}

function refuse(problems: Problem[]): never {
  throw new ConfigError(problems, "peergate migrate-data refused; nothing was copied");
}

async function openStore(store: DataStore, role: "from" | "to"): Promise<Database> {
  if (store.kind === "postgres") {
    checkDriverMended(resolveDriverDir(), false, () => {});
    // A long copy: statements get minutes, not the server's 5 s.
    return openDatabase({ kind: "postgres", url: store.url, statementTimeoutMs: 300_000 });
  }
  const dir = pgliteDir(store.dataDir);
  if (role === "from" && !existsSync(path.join(dir, "PG_VERSION"))) {
    refuse([
      {
        field: "--from",
        value: store.dataDir,
        message: `--from ${store.dataDir}: no embedded database there (no ${dir}/PG_VERSION); name the data directory the server ran with (PEERGATE_DATA_DIR)`,
      },
    ]);
  }
  try {
    // Takes `<dir>.lock`: a server serving this directory holds it, and the open fails.
    const database = await openDatabase({ kind: "pglite", dataDir: dir });
    makeOwnerOnly(dir);
    const close = database.close;
    return {
      ...database,
      close: async () => {
        await close();
        makeOwnerOnly(dir);
      },
    };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    refuse([
      {
        field: `--${role}`,
        value: store.dataDir,
        message: `--${role} ${store.dataDir}: ${reason}. Stop the server that uses it, then run migrate-data again`,
      },
    ]);
  }
}

function quoted(name: string): SQL {
  return sql.raw(`"${name.replaceAll('"', '""')}"`);
}

type TablePlan = {
  name: string;
  /** Columns written, in the table's order. */
  columns: string[];
  /** Of those, the ones written as the source's value plus the copy's xact shift. */
  moved: readonly string[];
  /** Primary-key columns: the read order and the keyset. */
  key: string[];
};

function planTable(table: PgTable): TablePlan {
  const config = getTableConfig(table);
  const name = config.name;
  const columns = config.columns.map((c) => c.name);
  const moved = shifted[name] ?? [];
  const key =
    config.primaryKeys[0]?.columns.map((c) => c.name) ??
    config.columns.filter((c) => c.primary).map((c) => c.name);
  if (key.length === 0) throw new Error(`table ${name} has no primary key to copy it by`);
  return { name, columns, moved, key };
}

async function countRows(db: DbOrTx, table: string): Promise<number> {
  const [row] = await selectRows<{ n: unknown }>(
    db,
    sql`select count(*)::bigint as n from ${quoted(table)}`,
  );
  return Number(row?.n ?? 0);
}

/** What keeps `database` from taking part, as to its migrations; undefined when nothing does. */
async function schemaProblem(
  database: Database,
  role: "from" | "to",
  store: DataStore,
): Promise<Problem | undefined> {
  const status = await migrationStatus(database, { timeoutMs: 30_000 });
  if (status.pending.length === 0 && status.applied === status.expected) return undefined;
  const where =
    store.kind === "postgres"
      ? `DATABASE_URL=<the --${role} URL>`
      : `PEERGATE_DATA_DIR=${store.dataDir}`;
  const problem =
    status.applied > status.expected
      ? `it carries ${status.applied} migrations and this peergate knows ${status.expected}: run the peergate version that migrated it`
      : `it carries ${status.applied} of this peergate's ${status.expected} migrations: run \`${where} peergate migrate\` first`;
  return {
    field: `--${role}`,
    value: describeStore(store),
    message: `--${role} ${describeStore(store)}: ${problem}`,
  };
}

/** Instances whose heartbeat is fresh by the database's own clock. */
async function liveInstances(db: DbOrTx): Promise<{ id: string; hostname: string; pid: number }[]> {
  return selectRows(
    db,
    sql`select id, hostname, pid from ${schema.instances}
         where heartbeat_at > clock_timestamp() - ${liveHeartbeatMs}::int * interval '1 millisecond'`,
  );
}

/**
 * A PostgreSQL source with a live instance (an embedded one is guarded by its data directory's
 * lock, taken when it was opened). There is no lock a server holds on PostgreSQL for its whole
 * life that this could take instead; the heartbeat is what every instance already keeps.
 */
async function servedProblem(database: Database, store: DataStore): Promise<Problem | undefined> {
  if (store.kind !== "postgres") return undefined;
  const live = await liveInstances(database.db);
  if (live.length === 0) return undefined;
  const who = live.map((i) => `${i.hostname} pid ${i.pid}`).join(", ");
  return {
    field: "--from",
    value: describeStore(store),
    message: `--from ${describeStore(store)} is being served: ${live.length} instance(s) sent a heartbeat within ${liveHeartbeatMs / 1000} s (${who}). Stop every peergate instance using it (a killed one's heartbeat goes stale after ${liveHeartbeatMs / 1000} s), then run migrate-data again`,
  };
}

/** Identity and serial columns, with the sequence behind each. */
async function readSequences(
  db: DbOrTx,
): Promise<{ table: string; column: string; sequence: string | null }[]> {
  return selectRows(
    db,
    sql`select c.table_name as "table", c.column_name as "column",
               pg_get_serial_sequence(quote_ident(c.table_name), c.column_name) as "sequence"
          from information_schema.columns c
         where c.table_schema = 'public'
           and (c.is_identity = 'YES' or c.column_default like 'nextval(%')
         order by 1, 2`,
  );
}

async function readSequenceValue(db: DbOrTx, sequence: string) {
  const [row] = await selectRows<{ last_value: unknown; is_called: boolean }>(
    db,
    sql`select last_value, is_called from ${sql.raw(sequence)}`,
  );
  return { lastValue: Number(row?.last_value ?? 1), isCalled: row?.is_called === true };
}

/** The text of a JSON array of rows, in pieces of at most `maxChars` (one insert each). */
function* chunksOf(rows: readonly string[], maxChars: number): Generator<string> {
  let start = 0;
  let size = 0;
  for (let i = 0; i < rows.length; i++) {
    const length = rows[i]?.length ?? 0;
    if (i > start && size + length > maxChars) {
      yield `[${rows.slice(start, i).join(",")}]`;
      start = i;
      size = 0;
    }
    size += length + 1;
  }
  if (start < rows.length) yield `[${rows.slice(start).join(",")}]`;
}

const maxInsertChars = 8 * 1024 * 1024;

async function copyTable(
  source: Database,
  target: DbOrTx,
  plan: TablePlan,
  copy: { total: number; batchRows: number; xactShift: SQL },
  progress: (line: string) => void,
): Promise<number> {
  const { total, batchRows } = copy;
  const table = quoted(plan.name);
  const keyList = sql.join(
    plan.key.map((k) => sql`t.${quoted(k)}`),
    sql`, `,
  );
  const keyOfLast = sql.join(
    plan.key.map((k) => sql`k.${quoted(k)}`),
    sql`, `,
  );
  const columns = sql.join(
    plan.columns.map((c) => quoted(c)),
    sql`, `,
  );
  const values = sql.join(
    plan.columns.map((c) =>
      plan.moved.includes(c) ? sql`${quoted(c)} + ${copy.xactShift}` : quoted(c),
    ),
    sql`, `,
  );
  const [identity] = await selectRows<{ n: unknown }>(
    target,
    sql`select count(*)::int as n from information_schema.columns
         where table_schema = 'public' and table_name = ${plan.name} and is_identity = 'YES'`,
  );
  const overriding = Number(identity?.n ?? 0) > 0 ? sql`overriding system value` : sql``;
  let last: string | undefined;
  let copied = 0;
  let batches = 0;
  for (;;) {
    const after =
      last === undefined
        ? sql``
        : sql`where (${keyList}) > (select ${keyOfLast} from json_populate_record(null::${table}, ${last}::json) k)`;
    const rows = await selectRows<{ row: string }>(
      source.db,
      sql`select row_to_json(t)::text as "row" from ${table} t ${after} order by ${keyList} limit ${batchRows}`,
    );
    if (rows.length === 0) break;
    const texts = rows.map((r) => r.row);
    for (const chunk of chunksOf(texts, maxInsertChars)) {
      await target.execute(
        sql`insert into ${table} (${columns}) ${overriding}
            select ${values} from json_populate_recordset(null::${table}, ${chunk}::json)`,
      );
    }
    copied += rows.length;
    last = texts.at(-1);
    batches += 1;
    if (batches % 20 === 0) progress(`  ${plan.name}: ${copied} of ${total} rows`);
    if (rows.length < batchRows) break;
  }
  return copied;
}

/**
 * Checks everything, then (with `apply`) copies. Throws ConfigError listing what stops it; the
 * target is left as it was (empty) whenever this throws.
 */
export async function migrateData(input: MigrateDataInput): Promise<MigrateDataResult> {
  const { from, to, apply } = input;
  const progress = input.onProgress ?? (() => {});
  const batchRows = input.batchRows ?? 500;
  if (from.kind === to.kind && sameStore(from, to)) {
    refuse([
      {
        field: "--to",
        value: describeStore(to),
        message: "--from and --to name the same database",
      },
    ]);
  }
  const plans = copiedTables.map(planTable);
  const source = await openStore(from, "from");
  try {
    const target = await openStore(to, "to");
    try {
      // Every reason to refuse, listed at once.
      const problems: Problem[] = [];
      const sourceSchema = await schemaProblem(source, "from", from);
      const targetSchema = await schemaProblem(target, "to", to);
      if (sourceSchema) problems.push(sourceSchema);
      // The instances table is as old as the schema: only a never-migrated source lacks it.
      const served = sourceSchema ? undefined : await servedProblem(source, from);
      if (served) problems.push(served);
      if (targetSchema) problems.push(targetSchema);
      else {
        const nonEmpty: string[] = [];
        for (const plan of plans) {
          const n = await countRows(target.db, plan.name);
          if (n > 0) nonEmpty.push(`${plan.name}: ${n}`);
        }
        if (nonEmpty.length > 0) {
          problems.push({
            field: "--to",
            value: describeStore(to),
            message: `--to ${describeStore(to)} is not empty (${nonEmpty.join(", ")}). migrate-data copies into an empty database only: create a new one (PostgreSQL: createdb; embedded: a new data directory), run \`peergate migrate\` against it, and do not start a server on it before the copy`,
          });
        }
      }
      if (problems.length > 0) refuse(problems);
      const status = await migrationStatus(source, { timeoutMs: 30_000 });

      const tables: TableCount[] = [];
      for (const plan of plans) {
        tables.push({ table: plan.name, source: await countRows(source.db, plan.name) });
      }
      const unchained = await readUnchainedTail(source.db);
      const result: MigrateDataResult = {
        apply,
        from: describeStore(from),
        to: describeStore(to),
        migrations: status.applied,
        tables,
        unchainedAudit: unchained.count,
        sequences: {},
      };
      if (!apply) return result;

      // The source's audit tail first: see the top of this file.
      if (unchained.count > 0) {
        progress(`chaining ${unchained.count} audit events on the source first`);
        const flushed = await flushAuditChain(source.db, {
          timeoutMs: 60_000,
          onTimeout: "return",
        });
        if (flushed.remaining > 0 || (await readUnchainedTail(source.db)).count > 0) {
          throw new Error(
            "the source's audit trail has events that cannot be chained (a transaction is still open on it?): stop every instance and run migrate-data again",
          );
        }
        for (const t of tables) {
          if (t.table === "audit_chain") t.source = await countRows(source.db, t.table);
        }
      }

      const sourceSequences = await readSequences(source.db);
      const [lastSource] = await selectRows<{ x: unknown }>(
        source.db,
        sql`select coalesce(max(xact_id), 0) as x from audit_events`,
      );
      await target.db.transaction(async (tx) => {
        // The source's last xact_id lands one below this transaction's id, every other at its
        // distance from it (see the top of this file).
        const xactShift = sql`(pg_current_xact_id()::text::bigint - 1 - ${String(lastSource?.x ?? 0)}::bigint)`;
        for (const plan of plans) {
          const count = tables.find((t) => t.table === plan.name);
          const copied = await copyTable(
            source,
            tx,
            plan,
            { total: count?.source ?? 0, batchRows, xactShift },
            progress,
          );
          progress(`${plan.name}: ${copied} rows copied`);
        }
        // Identity sequences: where the source's stood, never below what was copied.
        for (const s of sourceSequences) {
          if (!s.sequence) continue;
          const at = await readSequenceValue(source.db, s.sequence);
          const [max] = await selectRows<{ m: unknown }>(
            tx,
            sql`select max(${quoted(s.column)}) as m from ${quoted(s.table)}`,
          );
          const copiedMax = max?.m === null || max?.m === undefined ? 0 : Number(max.m);
          const value = Math.max(at.isCalled ? at.lastValue : at.lastValue - 1, copiedMax);
          const [targetSequence] = await selectRows<{ s: string | null }>(
            tx,
            sql`select pg_get_serial_sequence(${`"${s.table}"`}, ${s.column}) as s`,
          );
          if (!targetSequence?.s) continue;
          if (value > 0) {
            await tx.execute(sql`select setval(${targetSequence.s}::regclass, ${value}, true)`);
          }
          result.sequences[`${s.table}.${s.column}`] = value;
        }
        // Counts, in the transaction: any difference rolls the whole copy back.
        const differ: string[] = [];
        for (const t of tables) {
          t.target = await countRows(tx, t.table);
          if (t.target !== t.source) differ.push(`${t.table}: ${t.source} → ${t.target}`);
        }
        if (differ.length > 0) {
          throw new Error(`row counts differ after the copy (${differ.join(", ")}); rolled back`);
        }
        // The source must still be unserved at the end (PostgreSQL: nothing else keeps it so).
        const servedNow = await servedProblem(source, from);
        if (servedNow) refuse([servedNow]);
      });
      return result;
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}

function sameStore(a: DataStore, b: DataStore): boolean {
  if (a.kind === "pglite" && b.kind === "pglite")
    return pgliteDir(a.dataDir) === pgliteDir(b.dataDir);
  if (a.kind === "postgres" && b.kind === "postgres") return a.url === b.url;
  return false;
}
