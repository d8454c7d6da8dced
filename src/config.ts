// One schema over the environment, parsed once by src/main.ts. A bad value stops start-up with
// one message naming every bad variable, its value and what was expected.
import { lstatSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { ConfigError, type Problem } from "./errors.ts";
import { canonicalPath, liesWithin } from "./path-identity.ts";
import { plainIssueWords } from "./plain-issue.ts";
import { adminTokenFile, secretKeyFile } from "./secret-files.ts";

/** How processes started for runs are confined (src/sandbox/: bubblewrap, or not at all). */
export const sandboxKinds = ["bwrap", "none"] as const;
export type SandboxKind = (typeof sandboxKinds)[number];

export const logLevels = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = (typeof logLevels)[number];

/** Whether the file tools read a regular file that has more than one hard link. */
export const workspaceHardLinkModes = ["refuse", "allow"] as const;
export type WorkspaceHardLinks = (typeof workspaceHardLinkModes)[number];

const port = z.coerce
  .number({ error: "a port number from 0 to 65535" })
  .int({ error: "a whole port number from 0 to 65535" })
  .min(0, { error: "a port number from 0 to 65535" })
  .max(65535, { error: "a port number from 0 to 65535" });

const nonEmpty = (what: string) =>
  z
    .string()
    .trim()
    .min(1, { error: `${what} (not empty)` });

const postgresUrl = z
  .string()
  .trim()
  .refine((v) => /^postgres(ql)?:\/\/.+/.test(v), {
    error: "a PostgreSQL URL such as postgres://user:pass@127.0.0.1:5432/peergate",
  });

/** Where OTLP/HTTP spans go: an http(s) URL (the collector's base, or its /v1/traces). */
const otlpUrl = z
  .string()
  .trim()
  .refine((v) => /^https?:\/\/[^/?#\s]+(\/[^\s]*)?$/.test(v), {
    error: "an http(s) URL of an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318",
  });

/** The OTLP protocol: only http/json is exported (the installed exporter speaks nothing else). */
const otlpProtocol = z
  .enum(["", "http/json"], {
    error:
      "http/json (or unset): peergate exports traces as OTLP over HTTP with JSON; point it at a collector's HTTP port (4318), which accepts JSON",
  })
  .default("");

/**
 * Days each table family is kept (src/domain/retention.ts names the families); null: for ever.
 * The audit trail is never pruned unless the operator says so; the others are kept long enough
 * to answer questions about recent work (runs, tasks) and at least as long as the replay window
 * they guard (webhook claims, JWT ids).
 */
export const defaultRetentionDays = {
  runs: 90,
  tasks: 90,
  "push-deliveries": 30,
  "webhook-claims": 400,
  "jti-claims": 1,
  audit: null,
} as const satisfies Record<string, number | null>;

type RetentionFamilyName = keyof typeof defaultRetentionDays;

/** `PEERGATE_RETAIN_<FAMILY>_DAYS`: the variable naming a retention family's days. */
export function retentionVariable(family: RetentionFamilyName): string {
  return `PEERGATE_RETAIN_${family.toUpperCase().replaceAll("-", "_")}_DAYS`;
}

/** Whole days from 1 to 36500, or `off` (kept for ever); unset: the family's default. */
const retentionDays = (family: RetentionFamilyName) =>
  z.preprocess(
    (v) => (v === undefined || v === "" ? String(defaultRetentionDays[family] ?? "off") : v),
    z.union([z.literal("off").transform(() => null), z.coerce.number().int().min(1).max(36_500)], {
      error: "whole days from 1 to 36500, or off (never pruned)",
    }),
  );

// One variable per family, written out so the parsed environment stays typed.
const retentionSchema = z.object({
  PEERGATE_RETAIN_RUNS_DAYS: retentionDays("runs"),
  PEERGATE_RETAIN_TASKS_DAYS: retentionDays("tasks"),
  PEERGATE_RETAIN_PUSH_DELIVERIES_DAYS: retentionDays("push-deliveries"),
  PEERGATE_RETAIN_WEBHOOK_CLAIMS_DAYS: retentionDays("webhook-claims"),
  PEERGATE_RETAIN_JTI_CLAIMS_DAYS: retentionDays("jti-claims"),
  PEERGATE_RETAIN_AUDIT_DAYS: retentionDays("audit"),
});

/** Variables peergate reads, with their defaults. Documented in README.md. */
const envSchema = z.object({
  // PEERGATE_RETAIN_<FAMILY>_DAYS, one per family (above).
  ...retentionSchema.shape,
  PEERGATE_HOST: nonEmpty("a host name or IP address to listen on").default("127.0.0.1"),
  PEERGATE_PORT: port.default(8080),
  PEERGATE_DATA_DIR: nonEmpty("a directory path").default("./.peergate"),
  DATABASE_URL: z.preprocess((v) => (v === "" ? undefined : v), postgresUrl.optional()),
  PEERGATE_POLICIES_DIR: nonEmpty("a directory path").default("./policies"),
  PEERGATE_LOG_LEVEL: z
    .enum(logLevels, { error: `one of ${logLevels.join(", ")}` })
    .default("info"),
  PEERGATE_PUBLIC_URL: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z
      .string()
      .trim()
      .refine((v) => /^https?:\/\/[^/?#]+(\/[^?#]*)?$/.test(v) && !v.endsWith("/"), {
        error: "an http(s) URL without a trailing slash, e.g. https://peergate.example.com",
      })
      .optional(),
  ),
  PEERGATE_ADMIN_TOKEN: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z
      .string()
      .refine((v) => /^[A-Za-z0-9_\-.~+/]{32,512}$/.test(v), {
        error: "at least 32 characters of letters, digits and -._~+/ (or unset: one is generated)",
      })
      .optional(),
  ),
  PEERGATE_SECRET_KEY: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z
      .string()
      .refine((v) => /^([0-9a-fA-F]{64}|[A-Za-z0-9_\-+/]{43}=?)$/.test(v.trim()), {
        error:
          "32 random bytes as 64 hex digits or 43 base64url characters (or unset: one is generated in the data dir)",
      })
      .optional(),
  ),
  PEERGATE_WORKSPACE: z.preprocess((v) => (v === "" ? undefined : v), z.string().optional()),
  PEERGATE_MODEL: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z
      .string()
      .refine((v) => /^(openai|anthropic|openai-compatible):\S+$/.test(v), {
        error:
          "provider:model with provider openai, anthropic or openai-compatible, e.g. openai:gpt-4.1-mini",
      })
      .optional(),
  ),
  PEERGATE_MODEL_BASE_URL: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z.url({ error: "an http(s) URL, e.g. http://127.0.0.1:11434/v1" }).optional(),
  ),
  PEERGATE_MODEL_API_KEY: z.preprocess((v) => (v === "" ? undefined : v), z.string().optional()),
  PEERGATE_SANDBOX: z
    .enum(sandboxKinds, {
      error:
        "bwrap (processes run confined; the default) or none (no confinement: only when you accept that)",
    })
    .default("bwrap"),
  PEERGATE_WORKSPACE_HARD_LINKS: z
    .enum(workspaceHardLinkModes, {
      error:
        "refuse (file tools do not read a file with more than one hard link; the default) or allow",
    })
    .default("refuse"),
  // Runs starting at once on one instance (src/runs/start-queue.ts, docs/throttling.md); 0: no bound.
  PEERGATE_RUN_STARTS_AT_ONCE: z.coerce
    .number({ error: "a whole number from 0 (no bound) to 1000" })
    .int({ error: "a whole number from 0 (no bound) to 1000" })
    .min(0, { error: "a whole number from 0 (no bound) to 1000" })
    .max(1_000, { error: "a whole number from 0 (no bound) to 1000" })
    .default(8),
  PEERGATE_SHUTDOWN_TIMEOUT_MS: z.coerce
    .number({ error: "milliseconds, a whole number from 100 to 60000" })
    .int({ error: "milliseconds, a whole number from 100 to 60000" })
    .min(100, { error: "milliseconds, a whole number from 100 to 60000" })
    .max(60_000, { error: "milliseconds, a whole number from 100 to 60000" })
    .default(8_000),
  // Push notifications (docs/a2a.md): addresses exempted from the egress guard's refusal of
  // loopback and private targets, comma-separated; the lease a worker holds a delivery for.
  PEERGATE_PUSH_ALLOW_ADDRESSES: z
    .string()
    .default("")
    .transform((v) =>
      v
        .split(",")
        .map((a) => a.trim())
        .filter((a) => a !== ""),
    )
    .pipe(z.array(z.union([z.ipv4(), z.ipv6()], { error: "IP addresses, comma-separated" }))),
  // Notices about parked runs (docs/operating.md): where they go, the secret that signs them,
  // exempted addresses, and how close to its window's end a parked run is noticed again.
  PEERGATE_NOTIFY_URL: z
    .string()
    .default("")
    .transform((v) =>
      v
        .split(",")
        .map((u) => u.trim())
        .filter((u) => u !== ""),
    )
    .pipe(
      z.array(
        z.url({
          protocol: /^https?$/,
          error: "http(s) URLs, comma-separated, e.g. https://hooks.slack.com/services/…",
        }),
      ),
    ),
  PEERGATE_NOTIFY_SECRET: z.string().default(""),
  PEERGATE_NOTIFY_ALLOW_ADDRESSES: z
    .string()
    .default("")
    .transform((v) =>
      v
        .split(",")
        .map((a) => a.trim())
        .filter((a) => a !== ""),
    )
    .pipe(z.array(z.union([z.ipv4(), z.ipv6()], { error: "IP addresses, comma-separated" }))),
  PEERGATE_NOTIFY_EXPIRING_WITHIN_MS: z.coerce
    .number({ error: "milliseconds, a whole number from 1000 to 86400000" })
    .int({ error: "milliseconds, a whole number from 1000 to 86400000" })
    .min(1_000, { error: "milliseconds, a whole number from 1000 to 86400000" })
    .max(86_400_000, { error: "milliseconds, a whole number from 1000 to 86400000" })
    .default(3_600_000),
  PEERGATE_PUSH_LEASE_MS: z.coerce
    .number({ error: "milliseconds, a whole number from 1000 to 600000" })
    .int({ error: "milliseconds, a whole number from 1000 to 600000" })
    .min(1_000, { error: "milliseconds, a whole number from 1000 to 600000" })
    .max(600_000, { error: "milliseconds, a whole number from 1000 to 600000" })
    .default(30_000),
  // Opening PostgreSQL through a postgres.js without the project's mends (src/db/
  // postgres-driver.patch) is refused unless this is 1: an explicit, logged override.
  PEERGATE_ALLOW_UNMENDED_DRIVER: z
    .enum(["", "0", "1"], {
      error: "1 (open PostgreSQL through a driver without the project's mends) or unset",
    })
    .default(""),
  // The A2A gRPC binding (docs/a2a.md): off unless a port is set; plaintext, TLS left to a proxy.
  PEERGATE_GRPC_PORT: z.preprocess((v) => (v === "" ? undefined : v), port.optional()),
  PEERGATE_GRPC_HOST: nonEmpty("a host name or IP address to listen on").default("127.0.0.1"),
  PEERGATE_GRPC_PUBLIC_ADDRESS: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z
      .string()
      .trim()
      .refine((v) => /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(v), {
        error: "host:port, e.g. grpc.peergate.example.com:443 (the address callers dial)",
      })
      .optional(),
  ),
  PEERGATE_PUSH_RETRY_MS: z.coerce
    .number({ error: "milliseconds, a whole number from 10 to 60000" })
    .int({ error: "milliseconds, a whole number from 10 to 60000" })
    .min(10, { error: "milliseconds, a whole number from 10 to 60000" })
    .max(60_000, { error: "milliseconds, a whole number from 10 to 60000" })
    .default(1_000),
  // One push attempt's time limit; it is kept below the lease whatever is set, so an attempt
  // always ends before another instance may retake its delivery.
  PEERGATE_PUSH_TIMEOUT_MS: z.coerce
    .number({ error: "milliseconds, a whole number from 100 to 600000" })
    .int({ error: "milliseconds, a whole number from 100 to 600000" })
    .min(100, { error: "milliseconds, a whole number from 100 to 600000" })
    .max(600_000, { error: "milliseconds, a whole number from 100 to 600000" })
    .default(10_000),
  // Retention (docs/operating.md): how often the server prunes; 0 never (only `peergate prune`).
  PEERGATE_PRUNE_INTERVAL_MINUTES: z.coerce
    .number({ error: "minutes, a whole number from 0 (never) to 10080" })
    .int({ error: "minutes, a whole number from 0 (never) to 10080" })
    .min(0, { error: "minutes, a whole number from 0 (never) to 10080" })
    .max(10_080, { error: "minutes, a whole number from 0 (never) to 10080" })
    .default(60),
  // Traces (docs/operating.md "Traces"): the standard OpenTelemetry variables; off unless an
  // endpoint is set. Only OTLP over HTTP with JSON is exported (the one exporter installed).
  OTEL_EXPORTER_OTLP_ENDPOINT: z.preprocess((v) => (v === "" ? undefined : v), otlpUrl.optional()),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.preprocess(
    (v) => (v === "" ? undefined : v),
    otlpUrl.optional(),
  ),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol,
  OTEL_SDK_DISABLED: z
    .enum(["", "true", "false"], { error: "true (no traces even with an endpoint) or false" })
    .default(""),
  OTEL_SERVICE_NAME: z.preprocess((v) => (v === "" ? undefined : v), z.string().trim().optional()),
  // Prompts, answers and tool arguments in spans: only when the operator says so.
  PEERGATE_TRACE_CONTENT: z
    .enum(["", "0", "1"], {
      error: "1 (spans carry prompts, model answers and tool arguments) or unset",
    })
    .default(""),
  PEERGATE_PRUNE_BATCH: z.coerce
    .number({ error: "rows, a whole number from 10 to 100000" })
    .int({ error: "rows, a whole number from 10 to 100000" })
    .min(10, { error: "rows, a whole number from 10 to 100000" })
    .max(100_000, { error: "rows, a whole number from 10 to 100000" })
    .default(1_000),
});

export type Config = {
  host: string;
  port: number;
  dataDir: string;
  /** Absent: embedded PGlite in `<dataDir>/pg`. */
  databaseUrl: string | undefined;
  policiesDir: string;
  logLevel: LogLevel;
  shutdownTimeoutMs: number;
  /** Runs starting at once on this instance (PEERGATE_RUN_STARTS_AT_ONCE); 0: no bound. */
  runStartsAtOnce: number;
  /** How callers reach this server; default http://<host>:<port>. No trailing slash. */
  publicUrl: string | undefined;
  /** Absent: generated once and kept in `<dataDir>/admin-token`. */
  adminToken: string | undefined;
  /** Absent: generated once and kept in `<dataDir>/secret-key`. */
  secretKey: string | undefined;
  /** Where tools may read and write; default `./workspace`, never inside the data dir or around it. */
  workspace: string;
  /**
   * `refuse` (default): the file tools do not read a file with more than one hard link, since
   * another of its names may lie outside the workspace. `allow` when the workspace is trusted.
   */
  workspaceHardLinks: WorkspaceHardLinks;
  /** How processes started for runs are confined; `none` only when set explicitly. */
  sandbox: SandboxKind;
  /** `provider:model`, overriding policies/agent.yaml. */
  model: string | undefined;
  modelBaseUrl: string | undefined;
  modelApiKey: string | undefined;
  /** PEERGATE_ALLOW_UNMENDED_DRIVER=1: open PostgreSQL through an unmended driver (warned). */
  allowUnmendedDriver: boolean;
  /** Count statements and round trips (`Database.roundTrips`); set by the bench, never from the environment. */
  countRoundTrips?: boolean;
  /** Push notifications: exempted addresses, the delivery lease, the first retry delay. */
  push: { allowAddresses: string[]; leaseMs: number; retryBaseMs: number; timeoutMs: number };
  /** The A2A gRPC binding: absent unless PEERGATE_GRPC_PORT is set. */
  grpc: GrpcConfig | undefined;
  /** Notices about parked runs: absent unless PEERGATE_NOTIFY_URL is set. */
  notify: NotifyConfig | undefined;
  /** Traces: absent unless an OTLP endpoint is set (and OTEL_SDK_DISABLED is not true). */
  tracing: TracingConfig | undefined;
  /** Days kept per table family, the prune schedule and its batch (docs/operating.md). */
  retention: {
    days: Record<RetentionFamilyName, number | null>;
    intervalMs: number;
    batchSize: number;
  };
};

export type NotifyConfig = {
  readonly targets: readonly URL[];
  /** Signs every notice (HMAC-SHA256), so the receiver can tell it came from peergate. */
  readonly secret: string;
  /** Private addresses a target may have (an intranet host); metadata addresses never. */
  readonly allowAddresses: readonly string[];
  /** A parked run is noticed again once its window closes within this (default 1 hour). */
  readonly expiringWithinMs: number;
};

export type TracingConfig = {
  /** The full URL spans are posted to (…/v1/traces). */
  url: string;
  /** resource `service.name`; default `peergate`. */
  serviceName: string;
  /** PEERGATE_TRACE_CONTENT=1: prompts, answers and tool arguments may appear in spans. */
  content: boolean;
};

export type GrpcConfig = {
  host: string;
  /** 0: any free port (the card names the one bound). */
  port: number;
  /** host:port the card names; default the address bound. */
  publicAddress: string | undefined;
};

/** Variables whose values must never be echoed back, even in a configuration error. */
const secretVariables = new Set([
  "DATABASE_URL",
  "PEERGATE_ADMIN_TOKEN",
  "PEERGATE_SECRET_KEY",
  "PEERGATE_MODEL_API_KEY",
  "PEERGATE_NOTIFY_SECRET",
]);

function describeValue(name: string, value: unknown): string {
  if (value === undefined) return "(unset)";
  if (secretVariables.has(name)) return "(value hidden)";
  return JSON.stringify(value);
}

/**
 * Parses the environment into a Config. Relative paths resolve against `cwd`.
 * Throws ConfigError listing every problem at once.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>, cwd: string): Config {
  const parsed = envSchema.safeParse(env, { error: plainIssueWords });
  if (!parsed.success) {
    const problems: Problem[] = parsed.error.issues.map((issue) => {
      const field = String(issue.path[0] ?? "(environment)");
      const value = env[field];
      return {
        field,
        value: secretVariables.has(field) ? undefined : value,
        expected: issue.message,
        message: `${field}=${describeValue(field, value)}: expected ${issue.message}`,
      };
    });
    throw new ConfigError(problems);
  }
  const e = parsed.data;
  if (e.PEERGATE_NOTIFY_URL.length > 0 && e.PEERGATE_NOTIFY_SECRET.length < 16) {
    throw new ConfigError([
      {
        field: "PEERGATE_NOTIFY_SECRET",
        value: undefined,
        expected: "at least 16 characters when PEERGATE_NOTIFY_URL is set",
        message: `PEERGATE_NOTIFY_SECRET=${describeValue("PEERGATE_NOTIFY_SECRET", env.PEERGATE_NOTIFY_SECRET)}: PEERGATE_NOTIFY_URL needs a secret of at least 16 characters (e.g. \`openssl rand -hex 32\`): every notice is signed with it, so the receiver can tell it came from peergate`,
      },
    ]);
  }
  const dataDir = path.resolve(cwd, e.PEERGATE_DATA_DIR);
  const workspace = path.resolve(cwd, e.PEERGATE_WORKSPACE ?? "workspace");
  const policiesDir = path.resolve(cwd, e.PEERGATE_POLICIES_DIR);
  checkWorkspacePlace({ workspace, dataDir, policiesDir }, env);
  return {
    host: e.PEERGATE_HOST,
    port: e.PEERGATE_PORT,
    dataDir,
    databaseUrl: e.DATABASE_URL,
    policiesDir,
    logLevel: e.PEERGATE_LOG_LEVEL,
    shutdownTimeoutMs: e.PEERGATE_SHUTDOWN_TIMEOUT_MS,
    runStartsAtOnce: e.PEERGATE_RUN_STARTS_AT_ONCE,
    publicUrl: e.PEERGATE_PUBLIC_URL,
    adminToken: e.PEERGATE_ADMIN_TOKEN,
    secretKey: e.PEERGATE_SECRET_KEY,
    workspace,
    workspaceHardLinks: e.PEERGATE_WORKSPACE_HARD_LINKS,
    sandbox: e.PEERGATE_SANDBOX,
    model: e.PEERGATE_MODEL,
    modelBaseUrl: e.PEERGATE_MODEL_BASE_URL,
    modelApiKey: e.PEERGATE_MODEL_API_KEY,
    allowUnmendedDriver: e.PEERGATE_ALLOW_UNMENDED_DRIVER === "1",
    push: {
      allowAddresses: e.PEERGATE_PUSH_ALLOW_ADDRESSES,
      leaseMs: e.PEERGATE_PUSH_LEASE_MS,
      retryBaseMs: e.PEERGATE_PUSH_RETRY_MS,
      timeoutMs: e.PEERGATE_PUSH_TIMEOUT_MS,
    },
    grpc:
      e.PEERGATE_GRPC_PORT === undefined
        ? undefined
        : {
            host: e.PEERGATE_GRPC_HOST,
            port: e.PEERGATE_GRPC_PORT,
            publicAddress: e.PEERGATE_GRPC_PUBLIC_ADDRESS,
          },
    notify:
      e.PEERGATE_NOTIFY_URL.length === 0
        ? undefined
        : {
            targets: e.PEERGATE_NOTIFY_URL.map((u) => new URL(u)),
            secret: e.PEERGATE_NOTIFY_SECRET,
            allowAddresses: e.PEERGATE_NOTIFY_ALLOW_ADDRESSES,
            expiringWithinMs: e.PEERGATE_NOTIFY_EXPIRING_WITHIN_MS,
          },
    tracing: readTracing(e),
    retention: {
      days: Object.fromEntries(
        (Object.keys(defaultRetentionDays) as RetentionFamilyName[]).map((f) => [
          f,
          e[retentionVariable(f) as keyof typeof retentionSchema.shape],
        ]),
      ) as Record<RetentionFamilyName, number | null>,
      intervalMs: e.PEERGATE_PRUNE_INTERVAL_MINUTES * 60_000,
      batchSize: e.PEERGATE_PRUNE_BATCH,
    },
  };
}

/**
 * The standard OTLP rule: a signal's own endpoint is used as written; the general one gets
 * `v1/traces` appended. Either set turns traces on unless OTEL_SDK_DISABLED=true.
 */
function readTracing(e: z.infer<typeof envSchema>): TracingConfig | undefined {
  if (e.OTEL_SDK_DISABLED === "true") return undefined;
  const own = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const general = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  const url =
    own ?? (general === undefined ? undefined : `${general.replace(/\/+$/, "")}/v1/traces`);
  if (url === undefined) return undefined;
  return {
    url,
    serviceName: e.OTEL_SERVICE_NAME ?? "peergate",
    content: e.PEERGATE_TRACE_CONTENT === "1",
  };
}

/**
 * The data directory holds the admin token and the secret key: a process confined to the
 * workspace must not find it there, and a workspace inside the data dir would put the secrets one
 * `..` away. The policy files must not be in the workspace either, where a command could rewrite
 * the tools it is given. Each is compared by what it is (src/path-identity.ts: real paths, device
 * and inode, bind mounts), not by its spelling, so a symlinked parent or a second name is seen.
 * Run by loadConfig, again once the directories exist, and on every policy reload.
 */
export function checkWorkspacePlace(
  config: Pick<Config, "workspace" | "dataDir" | "policiesDir">,
  env: Readonly<Record<string, string | undefined>> = {},
): void {
  const { workspace, dataDir, policiesDir } = config;
  const field = env.PEERGATE_WORKSPACE ? "PEERGATE_WORKSPACE" : "PEERGATE_DATA_DIR";
  const value = field === "PEERGATE_WORKSPACE" ? workspace : dataDir;
  const problem = (message: string): Problem => ({
    field,
    value,
    expected: "a workspace and a data directory that do not contain each other",
    message,
  });
  const real = (p: string) => {
    const resolved = canonicalPath(p);
    return resolved === p ? "" : ` (really ${JSON.stringify(resolved)})`;
  };
  if (liesWithin(workspace, dataDir)) {
    throw new ConfigError([
      problem(
        `PEERGATE_WORKSPACE=${JSON.stringify(workspace)}${real(workspace)} is inside the data directory ${JSON.stringify(dataDir)}${real(dataDir)}, where the admin token and secret key are: set PEERGATE_WORKSPACE to a directory outside it (the default is ./workspace)`,
      ),
    ]);
  }
  if (liesWithin(dataDir, workspace)) {
    throw new ConfigError([
      problem(
        `PEERGATE_DATA_DIR=${JSON.stringify(dataDir)}${real(dataDir)} is inside the workspace ${JSON.stringify(workspace)}${real(workspace)}, so tools could read the admin token and secret key: set PEERGATE_DATA_DIR or PEERGATE_WORKSPACE so neither contains the other (through symlinks or bind mounts included)`,
      ),
    ]);
  }
  if (liesWithin(policiesDir, workspace)) {
    throw new ConfigError([
      {
        field: "PEERGATE_POLICIES_DIR",
        value: policiesDir,
        expected: "a policy directory outside the workspace",
        message: `PEERGATE_POLICIES_DIR=${JSON.stringify(policiesDir)}${real(policiesDir)} is inside the workspace ${JSON.stringify(workspace)}${real(workspace)}, so a command could rewrite the policies it runs under: set PEERGATE_POLICIES_DIR to a directory outside it`,
      },
    ]);
  }
  // The sandbox's /etc and the verified copies of scripts and pins are staged under TMPDIR: a
  // command that could write there would change what other commands read and run.
  const temp = os.tmpdir();
  if (liesWithin(temp, workspace)) {
    throw new ConfigError([
      {
        field: "TMPDIR",
        value: temp,
        expected: "a temp directory outside the workspace",
        message: `TMPDIR=${JSON.stringify(temp)}${real(temp)} is inside the workspace ${JSON.stringify(workspace)}: peergate stages the sandbox's /etc and verified scripts there; set TMPDIR (or PEERGATE_WORKSPACE) so the workspace does not hold it`,
      },
    ]);
  }
  // A second name of a secret file (a hard link) may lie anywhere, the workspace included.
  for (const name of [adminTokenFile, secretKeyFile]) {
    const file = path.join(dataDir, name);
    const links = linkCount(file);
    if (links > 1) {
      throw new ConfigError([
        {
          field: "PEERGATE_DATA_DIR",
          value: dataDir,
          expected: "secret files with one name each",
          message: `${file} has ${links} hard links: another name for it may be where tools can read it; remove the other links (find / -samefile ${file}) and rotate the secret`,
        },
      ]);
    }
  }
}

function linkCount(file: string): number {
  try {
    const stats = lstatSync(file);
    return stats.isFile() ? stats.nlink : 0;
  } catch {
    return 0;
  }
}
