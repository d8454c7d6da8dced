// Structured JSON logs, one object per line. Secrets never reach a log line: fields whose names
// look like credentials are replaced before serialisation, and strings are stripped of CR/LF so a
// hostile value cannot forge a second log line. A line written inside a span carries its
// `trace_id` and `span_id` (src/trace.ts), so a trace and the log lines of its request meet.
import type { LogLevel } from "./config.ts";
import { activeTraceIds } from "./trace.ts";

export type LogFields = Record<string, unknown>;

export type Logger = {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
};

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 99 };

/** Field names whose values are never logged, whatever they hold. */
const secretFieldPattern =
  /authorization|token|secret|password|passwd|cookie|jwt|credential|api[-_]?key|signature/i;

function redact(value: unknown, depth: number): unknown {
  if (depth > 6) return "[nested too deep]";
  if (typeof value === "string") return value.replace(/[\r\n\u2028\u2029]/g, " ");
  if (value instanceof Error) {
    // The cause says what actually failed (drizzle's message is only the query it ran).
    const cause = value.cause === undefined ? {} : { cause: redact(value.cause, depth + 1) };
    return { name: value.name, message: redact(value.message, depth + 1), ...cause };
  }
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      out[key] = secretFieldPattern.test(key) ? "[redacted]" : redact(v, depth + 1);
    }
    return out;
  }
  return value;
}

export function createLogger(options: {
  level: LogLevel;
  write: (line: string) => void;
  base?: LogFields;
  now?: () => Date;
}): Logger {
  const threshold = rank[options.level];
  const now = options.now ?? (() => new Date());
  const make = (base: LogFields): Logger => {
    const emit = (level: Exclude<LogLevel, "silent">, msg: string, fields?: LogFields) => {
      if (rank[level] < threshold) return;
      const record = redact({ ...base, ...fields, ...activeTraceIds() }, 0) as LogFields;
      options.write(
        JSON.stringify({ time: now().toISOString(), level, msg: redact(msg, 0), ...record }),
      );
    };
    return {
      debug: (msg, fields) => emit("debug", msg, fields),
      info: (msg, fields) => emit("info", msg, fields),
      warn: (msg, fields) => emit("warn", msg, fields),
      error: (msg, fields) => emit("error", msg, fields),
      child: (fields) => make({ ...base, ...fields }),
    };
  };
  return make(options.base ?? {});
}

/** A logger that drops everything; for tests and tools that must stay quiet. */
export const silentLogger: Logger = createLogger({ level: "silent", write: () => {} });
