// The worker thread that owns the embedded database (see pglite-thread.ts for the other side).
// PostgreSQL compiled to WebAssembly runs here, so its work does not hold up the server's event
// loop. This file only translates messages into PGlite calls and answers: the order of statements,
// transactions and errors are decided on the main thread.
//
// Loaded by Node directly (not through a bundler or the test runner), so it imports only PGlite
// and Node, and its syntax is what Node's type stripping runs.

import { parentPort, workerData } from "node:worker_threads";
import { messages, PGlite, type QueryOptions } from "@electric-sql/pglite";

/** What the main thread passes in `workerData`. */
export type PgliteWorkerData = {
  dataDir: string | undefined;
  /** A `dumpDataDir()` tarball to start from. */
  loadDataDir: ArrayBuffer | undefined;
  /** PostgreSQL's WebAssembly, compiled once per process (pglite-thread.ts). */
  pgliteWasmModule: WebAssembly.Module | undefined;
  initdbWasmModule: WebAssembly.Module | undefined;
};

/** One call; the worker answers each with a `PgliteReply` of the same `id`. */
export type PgliteRequest =
  | {
      id: number;
      op: "query";
      sql: string;
      params: unknown[] | undefined;
      options: WireOptions;
      transaction?: WireTransaction;
    }
  | { id: number; op: "exec"; sql: string; options: WireOptions; transaction?: WireTransaction }
  | { id: number; op: "listen" | "unlisten"; channel: string }
  | { id: number; op: "dump"; compression: "none" | "gzip" | "auto" }
  | { id: number; op: "close" };

/**
 * The query options that cross threads. Parsers are functions and cannot: the worker leaves the
 * columns of `rawTypes` as PostgreSQL's text, and the main thread runs the caller's parsers on it.
 */
export type WireOptions = {
  rowMode?: "array" | "object";
  rawTypes?: number[];
  paramTypes?: number[];
};

/**
 * Which transaction a statement belongs to, and whether it is its BEGIN, one of its statements or
 * its COMMIT/ROLLBACK. The main thread posts a transaction's statements without waiting for its
 * BEGIN's answer; when BEGIN fails, the worker answers each later statement of that transaction
 * with BEGIN's error instead of running it outside any transaction.
 */
export type WireTransaction = { id: number; step: "begin" | "statement" | "end" };

/** An error as it crosses threads: its message, stack, and every primitive field (`code`, …). */
export type WireError = {
  /** PGlite's `DatabaseError` (an error PostgreSQL reported), rather than any other. */
  database: boolean;
  name: string;
  message: string;
  stack: string | undefined;
  fields: Record<string, string | number | boolean>;
};

export type PgliteReply =
  | { type: "ready" }
  | { type: "failed"; error: WireError }
  | { type: "result"; id: number; value: unknown }
  | { type: "error"; id: number; error: WireError }
  | { type: "notification"; channel: string; payload: string };

export function toWireError(error: unknown): WireError {
  if (!(error instanceof Error)) {
    return { database: false, name: "Error", message: String(error), stack: undefined, fields: {} };
  }
  const fields: WireError["fields"] = {};
  for (const [key, value] of Object.entries(error)) {
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
      fields[key] = value;
    }
  }
  return {
    database: error instanceof messages.DatabaseError,
    name: error.name,
    message: error.message,
    stack: error.stack,
    fields,
  };
}

function toQueryOptions(options: WireOptions): QueryOptions {
  const raw = (value: string) => value;
  return {
    ...(options.rowMode ? { rowMode: options.rowMode } : {}),
    ...(options.paramTypes ? { paramTypes: options.paramTypes } : {}),
    ...(options.rawTypes
      ? { parsers: Object.fromEntries(options.rawTypes.map((type) => [type, raw])) }
      : {}),
  };
}

async function serve(port: NonNullable<typeof parentPort>, data: PgliteWorkerData): Promise<void> {
  let pg: PGlite;
  try {
    pg = await PGlite.create({
      dataDir: data.dataDir,
      loadDataDir: data.loadDataDir ? new Blob([data.loadDataDir]) : undefined,
      ...(data.pgliteWasmModule ? { pgliteWasmModule: data.pgliteWasmModule } : {}),
      ...(data.initdbWasmModule ? { initdbWasmModule: data.initdbWasmModule } : {}),
    });
  } catch (error) {
    port.postMessage({ type: "failed", error: toWireError(error) } satisfies PgliteReply);
    return;
  }
  const unlistens = new Map<string, () => Promise<void>>();
  /** Transactions whose BEGIN failed, with its error, until their end arrives. */
  const failedBegins = new Map<number, unknown>();

  const answer = async (request: PgliteRequest): Promise<unknown> => {
    if ((request.op === "query" || request.op === "exec") && request.transaction) {
      const { id, step } = request.transaction;
      const failed = failedBegins.get(id);
      if (step === "end") failedBegins.delete(id);
      if (failed !== undefined) throw failed;
      if (step === "begin") {
        try {
          return await pg.query(request.sql);
        } catch (error) {
          failedBegins.set(id, error);
          throw error;
        }
      }
    }
    switch (request.op) {
      case "query":
        return pg.query(request.sql, request.params, toQueryOptions(request.options));
      case "exec":
        return pg.exec(request.sql, toQueryOptions(request.options));
      case "listen": {
        if (unlistens.has(request.channel)) return undefined;
        const channel = request.channel;
        const unlisten = await pg.listen(channel, (payload) => {
          port.postMessage({ type: "notification", channel, payload } satisfies PgliteReply);
        });
        unlistens.set(channel, unlisten);
        return undefined;
      }
      case "unlisten": {
        const unlisten = unlistens.get(request.channel);
        unlistens.delete(request.channel);
        if (unlisten && !pg.closed) await unlisten();
        return undefined;
      }
      case "dump": {
        const file = await pg.dumpDataDir(request.compression);
        return file.arrayBuffer();
      }
      case "close":
        if (!pg.closed) await pg.close();
        return undefined;
    }
  };

  // One call at a time, in arrival order: each starts when the one before has been answered (PGlite
  // runs one at a time anyway), so a transaction's statements see whether its BEGIN failed.
  let previous: Promise<unknown> = Promise.resolve();
  port.on("message", (request: PgliteRequest) => {
    previous = previous
      .then(() => answer(request))
      .then(
        (value) => {
          const transfer = value instanceof ArrayBuffer ? [value] : [];
          port.postMessage(
            { type: "result", id: request.id, value } satisfies PgliteReply,
            transfer,
          );
          if (request.op === "close") port.close();
        },
        (error: unknown) => {
          port.postMessage({
            type: "error",
            id: request.id,
            error: toWireError(error),
          } satisfies PgliteReply);
        },
      );
  });
  port.postMessage({ type: "ready" } satisfies PgliteReply);
}

if (parentPort) void serve(parentPort, workerData as PgliteWorkerData);
