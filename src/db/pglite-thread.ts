// The embedded database in a worker thread (issue 28). PGlite is PostgreSQL compiled to
// WebAssembly; on the server's own thread every statement was CPU work on the event loop, and a
// burst of run starts kept /healthz and every other caller waiting for seconds. Here a worker
// (pglite-worker.ts) owns the PGlite instance and the main thread only exchanges messages with it,
// so I/O is served while the database works.
//
// `PgliteThread` offers what drizzle-orm/pglite calls on its client — `query`, `exec`,
// `transaction` — and what peergate adds — `listen`, `dumpDataDir`, `close` (docs/dependencies.md).
// PGlite's own `@electric-sql/pglite/worker` is built for a browser's Web Workers and tabs (leader
// election over navigator.locks and BroadcastChannel, `self.postMessage`) and leaves a call
// waiting when its worker dies; this is the small part of it a server needs, failing closed.
//
// PGlite has one session, and the order of everything sent on it is kept here. The worker runs
// messages in arrival order; the main thread decides that order:
// - one transaction at a time holds the session, from its BEGIN to its COMMIT (ROLLBACK when its
//   function throws). Its BEGIN is posted with no wait for the answer: its first statements follow
//   at once, and the worker refuses every later statement of a transaction whose BEGIN failed
//   (nothing of it runs outside the transaction);
// - a statement outside a transaction (and a LISTEN, a dump, the close) is posted at once when no
//   transaction holds the session; otherwise it waits for the holder's COMMIT or ROLLBACK only, and
//   is posted right behind it, before the next waiting transaction's BEGIN. A read outside a
//   transaction waits for at most one transaction, never for every transaction queued (issue 28:
//   another caller's GetTask during a burst of run starts waited behind all of them, a second);
// - transactions take the session in the order they asked for it.
// Statements that wait are posted in the order they were asked, so one caller's writes keep
// theirs. Handing the session on is one synchronous step (the holder's end posts the waiting
// statements and the next BEGIN), so nothing can slip in between.
// Errors come back with their fields (`code`, `detail`, `constraint`, …) as PGlite's
// `DatabaseError`. When the worker dies, every pending and later call fails with UnavailableError.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { messages, type QueryOptions, type Results } from "@electric-sql/pglite";
import { UnavailableError } from "../errors.ts";
import type {
  PgliteReply,
  PgliteRequest,
  PgliteWorkerData,
  WireError,
  WireOptions,
  WireTransaction,
} from "./pglite-worker.ts";

/** The statements a transaction's function runs, as PGlite's `Transaction` offers them. */
export type PgliteThreadTransaction = {
  query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
  exec(sql: string, options?: QueryOptions): Promise<Results[]>;
  /** Rolls back now; the transaction ends without COMMIT. */
  rollback(): Promise<void>;
  /**
   * Posts COMMIT right behind the next `count` statements and hands the session on, without
   * waiting for their answers (what `commitAfterStatements` asks, pipelined-transactions.ts): the
   * session is held for one main-thread round trip fewer.
   */
  commitAfter(count: number): void;
  readonly closed: boolean;
};

export type PgliteThread = {
  query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
  exec(sql: string, options?: QueryOptions): Promise<Results[]>;
  transaction<T>(work: (tx: PgliteThreadTransaction) => Promise<T>): Promise<T>;
  /** LISTEN on `channel` (a name PGlite can splice in unquoted). Returns a function that stops it. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  dumpDataDir(compression?: "none" | "gzip" | "auto"): Promise<Blob>;
  /** Idempotent; waits for an open transaction to end. */
  close(): Promise<void>;
  /** Stops the worker at once, as a crash would: pending calls fail with UnavailableError. */
  terminate(): Promise<void>;
  /** True after `close`, `terminate`, or the worker's end. */
  readonly closed: boolean;
};

const workerUrl = new URL("./pglite-worker.ts", import.meta.url);

/** Starts a worker that opens PGlite on `dataDir` (undefined: in memory); rejects if it cannot. */
export async function openPgliteThread(options: {
  dataDir: string | undefined;
  loadDataDir: Blob | undefined;
}): Promise<PgliteThread> {
  const loadDataDir = options.loadDataDir ? await options.loadDataDir.arrayBuffer() : undefined;
  const modules = await compiledModules();
  const workerData: PgliteWorkerData = { dataDir: options.dataDir, loadDataDir, ...modules };
  const worker = new Worker(workerUrl, {
    workerData,
    transferList: loadDataDir ? [loadDataDir] : [],
    // The worker runs plain TypeScript through Node's type stripping, whatever loaded this file.
    execArgv: [],
  });
  const thread = new Thread(worker);
  await thread.ready;
  return thread;
}

/** The global WebAssembly object, which the project's type libraries declare only as types. */
const wasm = (
  globalThis as unknown as {
    WebAssembly: { compile(bytes: Uint8Array): Promise<WebAssembly.Module> };
  }
).WebAssembly;

let compiling: Promise<Pick<PgliteWorkerData, "pgliteWasmModule" | "initdbWasmModule">> | undefined;

/**
 * PostgreSQL's and initdb's WebAssembly, compiled once for the process and shared with every
 * worker (a compiled module crosses to a worker without a copy). Each worker compiling its own
 * added half again to every open (0.4 s on a loaded machine), and the tests open many. Undefined
 * when the files are not where PGlite 0.5 keeps them: each worker then compiles its own.
 */
function compiledModules(): Promise<
  Pick<PgliteWorkerData, "pgliteWasmModule" | "initdbWasmModule">
> {
  compiling ??= (async () => {
    try {
      const dist = path.dirname(fileURLToPath(import.meta.resolve("@electric-sql/pglite")));
      const [pgliteWasmModule, initdbWasmModule] = await Promise.all(
        ["pglite.wasm", "initdb.wasm"].map(async (name) =>
          wasm.compile(await readFile(path.join(dist, name))),
        ),
      );
      return { pgliteWasmModule, initdbWasmModule };
    } catch {
      return { pgliteWasmModule: undefined, initdbWasmModule: undefined };
    }
  })();
  return compiling;
}

type Pending = { resolve(value: unknown): void; reject(error: Error): void };

class Thread implements PgliteThread {
  readonly ready: Promise<void>;
  #worker: Worker;
  #nextId = 1;
  #pending = new Map<number, Pending>();
  /** Why calls fail from now on; set once, when the worker ends or is closed. */
  #ended: UnavailableError | undefined;
  /** Whether a transaction holds the session (its BEGIN is posted, its COMMIT or ROLLBACK not). */
  #held = false;
  /** Statements outside a transaction waiting for the holder's end, in the order asked. */
  #waitingStatements: (() => void)[] = [];
  /** Transactions waiting for the session, in the order asked. */
  #waitingTransactions: (() => void)[] = [];
  #nextTransaction = 1;
  #listeners = new Map<string, Set<(payload: string) => void>>();
  #closing: Promise<void> | undefined;

  constructor(worker: Worker) {
    this.#worker = worker;
    this.ready = new Promise((resolve, reject) => {
      const settle = (reply: PgliteReply) => {
        if (reply.type === "ready") {
          // Only a call in flight keeps the process alive (as a socket would), not an idle
          // database.
          worker.unref();
          resolve();
        }
        if (reply.type === "failed") {
          reject(toError(reply.error));
          void worker.terminate();
        }
      };
      worker.once("message", settle);
      worker.once("exit", (code) =>
        reject(new UnavailableError(`the database worker exited (${code}) while opening`)),
      );
      worker.once("error", reject);
    });
    worker.on("message", (reply: PgliteReply) => this.#receive(reply));
    worker.on("error", (error) => this.#end(`the database worker failed: ${error.message}`, error));
    worker.on("exit", (code) => this.#end(`the database worker exited (${code})`));
  }

  get closed(): boolean {
    return this.#ended !== undefined || this.#closing !== undefined;
  }

  async query<T>(sql: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>> {
    const waiting = this.#outsideTransactions();
    if (waiting) await waiting;
    return this.#query<T>(sql, params, options);
  }

  async exec(sql: string, options?: QueryOptions): Promise<Results[]> {
    const waiting = this.#outsideTransactions();
    if (waiting) await waiting;
    return this.#exec(sql, options);
  }

  /**
   * Undefined when a statement outside a transaction may be posted now; else a promise that
   * resolves right after the holder's end was posted. The caller posts in the same synchronous
   * step as it checks or resumes (an `await` of undefined would leave a gap another transaction
   * could take the session in).
   */
  #outsideTransactions(): Promise<void> | undefined {
    if (!this.#held) return undefined;
    return new Promise<void>((resolve) => this.#waitingStatements.push(resolve));
  }

  /** Undefined when this transaction holds the session now; else resolves when it does. */
  #takeSession(): Promise<void> | undefined {
    if (!this.#held && this.#waitingTransactions.length === 0) {
      this.#held = true;
      return undefined;
    }
    return new Promise<void>((resolve) => this.#waitingTransactions.push(resolve));
  }

  /**
   * The holder's COMMIT or ROLLBACK has been posted: the statements that waited are posted now,
   * then the next transaction takes the session (each resumes synchronously in order, as its
   * promise's first reaction, and posts before the next resumes).
   */
  #releaseSession(): void {
    this.#held = false;
    const statements = this.#waitingStatements;
    this.#waitingStatements = [];
    for (const resume of statements) resume();
    const next = this.#waitingTransactions.shift();
    if (next) {
      this.#held = true;
      next();
    }
  }

  async transaction<T>(work: (tx: PgliteThreadTransaction) => Promise<T>): Promise<T> {
    const turn = this.#takeSession();
    if (turn) await turn;
    const id = this.#nextTransaction++;
    let closed = false;
    /** The COMMIT posted behind the declared statements (`commitAfter`), before `work` returned. */
    let committing: Promise<Results<unknown>> | undefined;
    let commitAfter: number | undefined;
    let firstError: { error: unknown } | undefined;
    const end = (statement: "COMMIT" | "ROLLBACK") => {
      closed = true;
      const sent = this.#query<unknown>(statement, undefined, undefined, { id, step: "end" });
      this.#releaseSession();
      return sent;
    };
    const statement = <R>(send: () => Promise<R>): Promise<R> => {
      if (closed) {
        return Promise.reject(
          committing
            ? new Error(
                "a statement was sent after its transaction's COMMIT: commitAfterStatements was " +
                  "given fewer statements than followed",
              )
            : transactionClosed(),
        );
      }
      const sent = send();
      sent.catch((error: unknown) => {
        firstError ??= { error };
      });
      if (commitAfter !== undefined && --commitAfter === 0) committing = end("COMMIT");
      return sent;
    };
    const tx: PgliteThreadTransaction = {
      query: <R>(sql: string, params?: unknown[], options?: QueryOptions) =>
        statement(() => this.#query<R>(sql, params, options, { id, step: "statement" })),
      exec: (sql: string, options?: QueryOptions) =>
        statement(() => this.#exec(sql, options, { id, step: "statement" })),
      rollback: async () => {
        if (!closed) await end("ROLLBACK");
      },
      commitAfter: (count: number) => {
        if (closed || commitAfter !== undefined) return;
        if (count <= 0) committing = end("COMMIT");
        else commitAfter = count;
      },
      get closed() {
        return closed;
      },
    };
    // BEGIN is not awaited: the first statements travel right behind it. If it fails, the worker
    // refuses the transaction's statements with its error, so `work` throws that.
    const begun = this.#query<unknown>("BEGIN", undefined, undefined, { id, step: "begin" });
    begun.catch(() => {});
    let result: T;
    try {
      result = await work(tx);
      await begun;
    } catch (error) {
      // A COMMIT already posted stands or falls with the statements before it.
      if (committing) await committing.catch(() => {});
      else if (!closed) await end("ROLLBACK").catch(() => {});
      throw error;
    }
    const ending = committing ?? (closed ? undefined : end("COMMIT"));
    if (ending) {
      const committed = await ending.catch((error: unknown) => {
        throw firstError?.error ?? error;
      });
      // A statement failed: PostgreSQL answers COMMIT with ROLLBACK. A caller that went on after
      // the failure hears that it was rolled back; one whose COMMIT went out early, the failure.
      if (committed.command === "ROLLBACK") {
        throw committing && firstError
          ? firstError.error
          : new Error("the transaction was rolled back: a statement in it failed");
      }
    }
    return result;
  }

  async listen(
    channel: string,
    onPayload: (payload: string) => void,
  ): Promise<() => Promise<void>> {
    let listeners = this.#listeners.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#listeners.set(channel, listeners);
      const waiting = this.#outsideTransactions();
      if (waiting) await waiting;
      try {
        await this.#call({ op: "listen", channel });
      } catch (error) {
        this.#listeners.delete(channel);
        throw error;
      }
    }
    listeners.add(onPayload);
    return async () => {
      const current = this.#listeners.get(channel);
      if (!current?.delete(onPayload) || current.size > 0) return;
      this.#listeners.delete(channel);
      if (this.closed) return;
      const waiting = this.#outsideTransactions();
      if (waiting) await waiting;
      await this.#call({ op: "unlisten", channel });
    };
  }

  async dumpDataDir(compression: "none" | "gzip" | "auto" = "auto"): Promise<Blob> {
    const waiting = this.#outsideTransactions();
    if (waiting) await waiting;
    return new Blob([(await this.#call({ op: "dump", compression })) as ArrayBuffer]);
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#ended) return;
      const waiting = this.#outsideTransactions();
      if (waiting) await waiting;
      try {
        await this.#call({ op: "close" });
      } finally {
        this.#end("the database is closed");
        await this.#worker.terminate();
      }
    })();
    return this.#closing;
  }

  async terminate(): Promise<void> {
    await this.#worker.terminate();
    this.#end("the database worker was stopped");
  }

  async #query<T>(
    sql: string,
    params?: unknown[],
    options?: QueryOptions,
    transaction?: WireTransaction,
  ): Promise<Results<T>> {
    const result = (await this.#call({
      op: "query",
      sql,
      params,
      options: toWireOptions(options),
      ...(transaction ? { transaction } : {}),
    })) as Results<T>;
    return applyParsers(result, options);
  }

  async #exec(
    sql: string,
    options?: QueryOptions,
    transaction?: WireTransaction,
  ): Promise<Results[]> {
    const results = (await this.#call({
      op: "exec",
      sql,
      options: toWireOptions(options),
      ...(transaction ? { transaction } : {}),
    })) as Results[];
    return results.map((result) => applyParsers(result, options));
  }

  #call(request: DistributiveOmit<PgliteRequest, "id">): Promise<unknown> {
    if (this.#ended) return Promise.reject(this.#ended);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...request, id } as PgliteRequest);
    });
  }

  #receive(reply: PgliteReply): void {
    if (reply.type === "notification") {
      for (const listener of this.#listeners.get(reply.channel) ?? []) listener(reply.payload);
      return;
    }
    if (reply.type !== "result" && reply.type !== "error") return;
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#worker.unref();
    if (reply.type === "result") pending.resolve(reply.value);
    else pending.reject(toError(reply.error));
  }

  /** From now on every call fails closed; so does every call still waiting for an answer. */
  #end(reason: string, cause?: unknown): void {
    if (this.#ended) return;
    this.#ended = new UnavailableError(reason, cause === undefined ? undefined : { cause });
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    this.#worker.unref();
    for (const call of pending) call.reject(this.#ended);
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function transactionClosed(): Error {
  return new Error("the transaction is already closed");
}

/** The options that can cross to the worker; rejects any it could not honour. */
function toWireOptions(options: QueryOptions | undefined): WireOptions {
  if (!options) return {};
  if (options.serializers || options.blob || options.onNotice) {
    throw new TypeError("the embedded database's worker takes no serializers, blob or onNotice");
  }
  return {
    ...(options.rowMode ? { rowMode: options.rowMode } : {}),
    ...(options.paramTypes ? { paramTypes: options.paramTypes } : {}),
    ...(options.parsers ? { rawTypes: Object.keys(options.parsers).map(Number) } : {}),
  };
}

/** Runs the caller's parsers on the columns the worker left as text. */
function applyParsers<T>(result: Results<T>, options: QueryOptions | undefined): Results<T> {
  const parsers = options?.parsers;
  if (!parsers) return result;
  result.fields.forEach((field, index) => {
    const parse = parsers[field.dataTypeID];
    if (!parse) return;
    const key = options.rowMode === "array" ? index : field.name;
    for (const row of result.rows as Record<string | number, unknown>[]) {
      const value = row[key];
      if (typeof value === "string") {
        row[key] = (parse as (text: string, type: number) => unknown)(value, field.dataTypeID);
      }
    }
  });
  return result;
}

/** PGlite's error again, on this side: a `DatabaseError` when it was one, with every field. */
function toError(wire: WireError): Error {
  const error = wire.database
    ? new messages.DatabaseError(wire.message, 0, "error")
    : Object.assign(new Error(wire.message), { name: wire.name });
  Object.assign(error, wire.fields);
  if (wire.stack) error.stack = wire.stack;
  return error;
}
