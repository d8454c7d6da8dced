// peergate's guarantees for one run, written by hand the lean way with postgres.js: what the
// do-it-yourself stack (bench/diy-server.ts) adds to become "DIY with peergate's guarantees"
// (`--serve diy-guaranteed` in bench/a2a.ts), so the bench can show the floor those guarantees
// set, measured beside peergate in the same run. Its own small schema, created at start.
//
// What it implements (docs/design.md; the same rules peergate keeps):
// - **exact budgets**: the start's one statement takes a concurrency slot under the caller's row
//   lock (`running < concurrent_runs`, and not revoked: a revocation committed before the start
//   is seen under that lock, as peergate's re-read of the caller sees it), then, under the day
//   row's lock, the day's run count and a share of its tokens and dollars (runs below the limit,
//   spent + reserved below the limit; the share is the daily limit / concurrent_runs, peergate's
//   rule without a per-run cap). The run is granted min(share, what the day left), its output capped at the grant
//   (`maxOutputTokens`). The end charges what the run spent and gives the share and the slot back,
//   in the same lock order (caller row, then day row), so admissions and ends cannot deadlock;
// - **a durable run row before the model call**: the run is inserted `working` in the start's
//   transaction, whose COMMIT is answered before the model is called;
// - **an audit event in the transaction of the write it records**: `run.started` with the start,
//   `run.<status>` with the end; the audit table refuses UPDATE, DELETE and TRUNCATE (a trigger);
// - **a run's end written once**: the end is a compare-and-set (`status = 'working'`); slot, day
//   and event follow from its RETURNING, so an end that lost changes nothing;
// - **no late commit**: each statement and each COMMIT has a deadline (peergate's 5 s), and the
//   COMMIT is sent only once the statement answered, so a server that freezes and wakes runs the
//   ROLLBACK queued behind a late statement rather than commit work the request was told failed.
//   This is why each transaction is two round trips (BEGIN pipelined with its statement, then the
//   COMMIT), as peergate's are.
//
// What it leaves out: everything of peergate's that is no guarantee (the ceiling and the gate, the
// task event log, push, logs, metrics, tracing), and of its guarantees, with where peergate has
// them:
// - the hash chain: events are rows in one append-only table (identity id, time, actor, kind,
//   subject, jsonb data; no index besides the key). peergate's events also carry the inserting
//   transaction's id, three indexes for the admin's reads, and a chainer links them in batches
//   off the request's path (src/db/audit-chainer.ts, its passes counted in peergate's round trips);
// - the hardening of the deadline's failure paths: a late statement is not cancelled (peergate
//   sends a CancelRequest), the wait for a pooled connection has no deadline, a lost connection is
//   not singled out (src/db/statement-deadline.ts, src/db/pipelined-transactions.ts). None of it
//   costs anything while the server answers;
// - crash recovery: the `working` row is what makes it possible, but there are no heartbeats, no
//   owner instance and no sweeper that ends an orphaned run and gives its slot back;
// - stopping a running run (cancel, revocation: there is no cancel endpoint, though the end's
//   compare-and-set would respect a stop written on the row), per-run caps, parking and approvals,
//   and usage charged to the day it was spent (a run that crosses midnight UTC is charged to its
//   admission day here). Tokens charged are the model's reported total; the bench's model is
//   priced at $0, as in peergate's bench policies, so the dollar meter moves only by its shares.
import type postgres from "postgres";

/** The statement deadline, peergate's default (src/db/client.ts). */
const deadlineMs = 5_000;

export type Budgets = {
  concurrentRuns: number;
  dailyRuns: number;
  dailyTokens: number;
  dailyCostUsd: number;
};

export type Admitted = { runId: string; grantedTokens: number; grantedCostUsd: number };

export type Guarantees = {
  /**
   * Admits `caller`'s run and records it `working` with its `run.started` event; undefined when
   * refused.
   */
  start(input: {
    caller: string;
    runId: string;
    taskId: string;
    input: string;
  }): Promise<Admitted | undefined>;
  /** Writes the run's end once, settles the day, gives the slot back; false if it had ended. */
  end(input: {
    caller: string;
    runId: string;
    status: "completed" | "failed";
    text: string;
    tokens: number;
    costUsd: number;
  }): Promise<boolean>;
  /**
   * What is wrong once every run has ended (the bench's stop): a slot or share not given back, a
   * run not ended, a run without its two events. Empty when all holds.
   */
  check(): Promise<string[]>;
};

const schema = [
  `create table if not exists diyg_callers (
     name text primary key, token_sha256 text unique not null, revoked boolean not null default false,
     running int not null default 0, concurrent_runs int not null, daily_runs int not null,
     daily_tokens bigint not null, daily_cost_usd numeric not null)`,
  `create table if not exists diyg_daily_usage (
     caller text not null, day date not null, runs int not null default 0,
     tokens bigint not null default 0, cost_usd numeric not null default 0,
     reserved_tokens bigint not null default 0, reserved_cost_usd numeric not null default 0,
     primary key (caller, day))`,
  `create table if not exists diyg_runs (
     id uuid primary key, caller text not null, task_id text not null, status text not null,
     input text not null, result text, day date not null, held_tokens bigint not null,
     held_cost_usd numeric not null, granted_tokens bigint not null, granted_cost_usd numeric not null,
     tokens bigint, cost_usd numeric, created_at timestamptz not null default now(),
     finished_at timestamptz)`,
  `create table if not exists diyg_audit (
     id bigint generated always as identity primary key,
     created_at timestamptz not null default clock_timestamp(), actor text not null,
     kind text not null, subject text, data jsonb not null)`,
  `create or replace function diyg_audit_append_only() returns trigger language plpgsql as $$
     begin raise exception 'diyg_audit is append-only: % refused', tg_op; end $$`,
  `create or replace trigger diyg_audit_append_only before update or delete on diyg_audit
     for each row execute function diyg_audit_append_only()`,
  `create or replace trigger diyg_audit_no_truncate before truncate on diyg_audit
     for each statement execute function diyg_audit_append_only()`,
  `create or replace function diyg_refused() returns boolean language plpgsql as $$
     begin raise exception using errcode = 'P0001', message = 'diyg: refused'; end $$`,
];

// The start: slot (caller row locked), then the day (its row locked), then the run and its event,
// each only if what it depends on was taken. A refusal returns slot or taken false, and the
// transaction is rolled back (the slot the statement may have taken goes with it).
const startStatement = `with slot as (
    update diyg_callers set running = running + 1
    where name = $1 and not revoked and running < concurrent_runs
    returning name, daily_runs, daily_tokens, daily_cost_usd,
      ceil(daily_tokens::numeric / concurrent_runs)::bigint as held_tokens,
      round(daily_cost_usd / concurrent_runs, 6) as held_cost
  ),
  taken as (
    insert into diyg_daily_usage as d (caller, day, runs, reserved_tokens, reserved_cost_usd)
    select name, $2::date, 1, held_tokens, held_cost from slot
    on conflict (caller, day) do update set
      runs = d.runs + 1,
      reserved_tokens = d.reserved_tokens + excluded.reserved_tokens,
      reserved_cost_usd = d.reserved_cost_usd + excluded.reserved_cost_usd
    where d.runs < (select daily_runs from slot)
      and d.tokens + d.reserved_tokens < (select daily_tokens from slot)
      and d.cost_usd + d.reserved_cost_usd < (select daily_cost_usd from slot)
    returning d.tokens, d.cost_usd, d.reserved_tokens, d.reserved_cost_usd
  ),
  run as (
    insert into diyg_runs (id, caller, task_id, status, input, day, held_tokens, held_cost_usd,
      granted_tokens, granted_cost_usd)
    select $3::uuid, s.name, $4, 'working', $5, $2::date, s.held_tokens, s.held_cost,
      greatest(0, least(s.held_tokens,
        s.daily_tokens - t.tokens - (t.reserved_tokens - s.held_tokens))),
      greatest(0, least(s.held_cost,
        s.daily_cost_usd - t.cost_usd - (t.reserved_cost_usd - s.held_cost)))
    from slot s, taken t
    returning id, granted_tokens, granted_cost_usd
  ),
  event as (
    insert into diyg_audit (actor, kind, subject, data)
    select 'caller:' || $1, 'run.started', 'run:' || id,
      jsonb_build_object('runId', id, 'a2aTaskId', $4::text)
    from run
  )
  select exists (select 1 from slot) as slot, exists (select 1 from taken) as taken,
    (select granted_tokens from run) as granted_tokens,
    (select granted_cost_usd from run) as granted_cost_usd`;

// The same start with its COMMIT sent right behind it (`commitBehind`): a refusal must then fail
// the statement, so that the server turns the COMMIT into a ROLLBACK.
const startOrFail = `${startStatement.replace(/\n {2}select exists[\s\S]*$/, "")}
  select true as slot, true as taken, granted_tokens, granted_cost_usd
  from (select 1) one left join run on true
  where case when exists (select 1 from run) then true else diyg_refused() end`;

// The end: the compare-and-set, then the slot (caller row), then the day (its row), then the
// event, each only when the compare-and-set matched.
const endStatement = `with done as (
    update diyg_runs set status = $2, result = $3, tokens = $4::bigint, cost_usd = $5::numeric,
      finished_at = now()
    where id = $1::uuid and status = 'working'
    returning caller, day, held_tokens, held_cost_usd
  ),
  slot as (
    update diyg_callers c set running = greatest(0, c.running - 1)
    from done where c.name = done.caller
    returning c.name
  ),
  day as (
    update diyg_daily_usage u set
      tokens = u.tokens + $4::bigint,
      cost_usd = u.cost_usd + $5::numeric,
      reserved_tokens = greatest(0, u.reserved_tokens - done.held_tokens),
      reserved_cost_usd = greatest(0, u.reserved_cost_usd - done.held_cost_usd)
    from done
    where u.caller = done.caller and u.day = done.day and exists (select 1 from slot)
    returning 1
  ),
  event as (
    insert into diyg_audit (actor, kind, subject, data)
    select 'caller:' || $6, 'run.' || $2, 'run:' || $1,
      jsonb_build_object('runId', $1::text, 'status', $2::text, 'tokens', $4::bigint,
        'costUsd', $5::numeric)
    from done
  )
  select count(*)::int as n from done`;

class DeadlineError extends Error {}

function withDeadline<T>(promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError("the database did not answer")), deadlineMs);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * One transaction of one statement on a reserved connection: BEGIN pipelined with the statement,
 * then COMMIT once its answer came back and `keep` accepts it, else ROLLBACK.
 */
async function transaction<Row>(
  sql: postgres.Sql,
  text: string,
  params: unknown[],
  keep: (rows: Row[]) => boolean,
): Promise<Row[]> {
  const tx = await sql.reserve();
  let release = true;
  try {
    const begin = tx.unsafe("begin");
    const statement = tx.unsafe(text, params as never[], { prepare: true });
    begin.catch(() => {});
    let rows: Row[];
    try {
      rows = (await withDeadline(statement)) as unknown as Row[];
    } catch (error) {
      // Queued behind the statement: a server that wakes rolls it back, never commits it.
      release = false;
      statement.catch(() => {});
      tx.unsafe("rollback")
        .catch(() => {})
        .finally(() => tx.release());
      throw error;
    }
    await withDeadline(tx.unsafe(keep(rows) ? "commit" : "rollback"));
    return rows;
  } finally {
    if (release) tx.release();
  }
}

/**
 * The start with its COMMIT pipelined behind the statement (one round trip): the rows are locked
 * only while the server runs it. A refusal fails the statement, so the COMMIT rolls back; rows
 * empty then. What it gives up: a COMMIT already sent when the server freezes may commit after
 * the request was told it failed (a `working` run left for a sweeper peergate has and this lacks).
 */
async function transactionCommitBehind<Row>(
  sql: postgres.Sql,
  text: string,
  params: unknown[],
): Promise<Row[]> {
  const tx = await sql.reserve();
  const begin = tx.unsafe("begin");
  const statement = tx.unsafe(text, params as never[], { prepare: true });
  const commit = tx.unsafe("commit");
  begin.catch(() => {});
  statement.catch(() => {});
  // Released once the server answered the COMMIT (or ROLLBACK), whatever the request heard.
  commit.then(
    () => tx.release(),
    () => tx.release(),
  );
  try {
    const rows = (await withDeadline(statement)) as unknown as Row[];
    await withDeadline(commit);
    return rows;
  } catch (error) {
    if (error instanceof Error && error.message === "diyg: refused") return [];
    throw error;
  }
}

export async function openGuarantees(
  query: <Row>(text: string, params?: unknown[]) => Promise<Row[]>,
  sql: postgres.Sql,
  callers: { name: string; tokenSha256: string }[],
  budgets: Budgets,
  /** The start's COMMIT sent behind its statement (a variant the bench can measure). */
  commitBehind = false,
): Promise<Guarantees> {
  for (const statement of schema) await query(statement);
  for (const caller of callers) {
    await query(
      `insert into diyg_callers (name, token_sha256, concurrent_runs, daily_runs, daily_tokens,
         daily_cost_usd) values ($1, $2, $3, $4, $5, $6) on conflict do nothing`,
      [
        caller.name,
        caller.tokenSha256,
        budgets.concurrentRuns,
        budgets.dailyRuns,
        budgets.dailyTokens,
        budgets.dailyCostUsd,
      ],
    );
  }
  type StartRow = {
    slot: boolean;
    taken: boolean;
    granted_tokens: string | null;
    granted_cost_usd: string | null;
  };
  return {
    async start(input) {
      const day = new Date().toISOString().slice(0, 10);
      const params = [input.caller, day, input.runId, input.taskId, input.input];
      const [row] = commitBehind
        ? await transactionCommitBehind<StartRow>(sql, startOrFail, params)
        : await transaction<StartRow>(sql, startStatement, params, (rows) =>
            Boolean(rows[0]?.slot && rows[0].taken),
          );
      if (!row?.slot || !row.taken) return undefined;
      return {
        runId: input.runId,
        grantedTokens: Number(row.granted_tokens),
        grantedCostUsd: Number(row.granted_cost_usd),
      };
    },
    async end(input) {
      const [row] = await transaction<{ n: number }>(
        sql,
        endStatement,
        [
          input.runId,
          input.status,
          input.text,
          Math.round(input.tokens),
          input.costUsd.toFixed(6),
          input.caller,
        ],
        () => true,
      );
      return Number(row?.n ?? 0) > 0;
    },
    async check() {
      const [row] = await query<Record<string, string>>(
        `select (select coalesce(sum(running), 0) from diyg_callers) as running,
           (select coalesce(sum(reserved_tokens), 0) from diyg_daily_usage) as reserved_tokens,
           (select coalesce(sum(reserved_cost_usd), 0) from diyg_daily_usage) as reserved_cost_usd,
           (select count(*) from diyg_runs where status = 'working') as working,
           (select count(*) from diyg_audit) - 2 * (select count(*) from diyg_runs) as extra_events,
           (select coalesce(sum(runs), 0) from diyg_daily_usage)
             - (select count(*) from diyg_runs) as extra_runs`,
      );
      return Object.entries(row ?? {})
        .filter(([, value]) => Number(value) !== 0)
        .map(([name, value]) => `${name} = ${value}`);
    },
  };
}
