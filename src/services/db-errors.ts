// Recognising PostgreSQL errors through drizzle's wrapping, the same way on both drivers.
import { UnavailableError } from "../errors.ts";

function sqlState(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export function isUniqueViolation(error: unknown): boolean {
  return sqlState(error) === "23505";
}

/** postgres.js and Node codes for a server that cannot be reached or went away. */
const connectionCodes = new Set([
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/** Why a SQLSTATE means the database cannot serve now (not that the request is wrong). */
function describeUnavailableState(state: string): string | undefined {
  if (state === "53100") return "the database is out of disk space";
  if (state === "53200") return "the database is out of memory";
  if (state === "53300") return "the database has too many connections";
  if (state.startsWith("53")) return "the database is out of resources";
  if (state.startsWith("08")) return "the connection to the database failed";
  if (state === "57P01" || state === "57P02") return "the database is shutting down";
  if (state === "57P03") return "the database is starting up";
  return undefined;
}

/**
 * The UnavailableError behind `error` — thrown as such (a deadline, a closed database), or a
 * driver error saying the database is unreachable, restarting, or out of disk, memory or
 * connections — found through drizzle's DrizzleQueryError wrapping. Undefined for any other error
 * (a constraint, a bug): those are not the database's availability.
 */
export function asUnavailableError(error: unknown): UnavailableError | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 6; depth++) {
    if (e instanceof UnavailableError) return e;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") {
      if (connectionCodes.has(code)) {
        return new UnavailableError("the database cannot be reached", { cause: error });
      }
      const reason = /^[0-9A-Z]{5}$/.test(code) ? describeUnavailableState(code) : undefined;
      if (reason) return new UnavailableError(reason, { cause: error });
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
