// `peergate doctor`: what would stop or mislead an operator, found before a caller finds it. Each
// check says what it found and, when something is wrong, what to do. The same checks run at
// `npm start` (logged as warnings), except those the server does itself (the sandbox probe).
//
// Nothing here changes anything: no migration is applied, no key or token is created.
import { generateText } from "ai";
import { and, isNotNull, isNull, sql } from "drizzle-orm";
import { openSecret, parseSecretKey, type SecretKey } from "../auth/sealed-secrets.ts";
import { hashSecret, safeEqual } from "../auth/secrets.ts";
import type { Config } from "../config.ts";
import type { Database, DbOrTx } from "../db/client.ts";
import { migrationStatus } from "../db/migrate.ts";
import { openConfiguredDatabase } from "../db/open-configured.ts";
import { credentials } from "../db/schema.ts";
import { type LoadedPolicies, loadPolicies } from "../load-policies.ts";
import type { Logger } from "../log.ts";
import { findModelPrice, loadPriceTable, type PriceTable } from "../runs/prices.ts";
import { resolveModel } from "../runs/resolve-model.ts";
import { createSandboxBackend } from "../sandbox/create-sandbox.ts";
import { probeSandbox } from "../sandbox/probe.ts";
import { adminTokenFile, readSecretFile, secretKeyFile } from "../secret-files.ts";
import { defaultBudgets } from "./caller-input.ts";
import { sealContext } from "./issue-credential.ts";

export type DoctorStatus = "ok" | "warn" | "fail" | "skip";
export type DoctorCheck = {
  readonly check: string;
  readonly status: DoctorStatus;
  readonly detail: string;
  /** What to do about it, when status is warn or fail. */
  readonly fix?: string;
};

export type DoctorInput = {
  readonly config: Config;
  /** The server's open database; without it doctor opens (and closes) the configured one. */
  readonly database?: Database;
  readonly policies?: LoadedPolicies;
  readonly priceTable?: PriceTable;
  /** Make one tiny model call (default true). */
  readonly modelCall?: boolean;
  /** Probe the sandbox backend (default true; the server probes it itself). */
  readonly sandbox?: boolean;
  readonly modelTimeoutMs?: number;
  /**
   * Whether a running server holds the embedded database (it admits one process), asked only when
   * doctor would open that database itself; the CLI asks the server's control socket. Without
   * it, doctor opens the database.
   */
  readonly serverHoldsDatabase?: (dataDir: string) => Promise<boolean>;
};

const describe = (error: unknown) => (error instanceof Error ? error.message : String(error));

export async function diagnose(input: DoctorInput): Promise<DoctorCheck[]> {
  const { config } = input;
  const checks: DoctorCheck[] = [];
  const add = (check: DoctorCheck) => checks.push(check);

  // Policy files.
  let policies = input.policies;
  let priceTable = input.priceTable;
  try {
    policies ??= await loadPolicies(config.policiesDir);
    priceTable ??= await loadPriceTable(`${config.policiesDir}/models.yaml`);
    add({ check: "policies", status: "ok", detail: `${config.policiesDir}: valid` });
  } catch (error) {
    add({
      check: "policies",
      status: "fail",
      detail: describe(error),
      fix: `fix the file named above in ${config.policiesDir}`,
    });
  }

  // Model: configured, priced, answering.
  const modelId = config.model ?? policies?.agent.model;
  const model = resolveModel({
    modelId,
    baseUrl: config.modelBaseUrl,
    apiKey: config.modelApiKey,
  });
  if (!model.ok) {
    add({
      check: "model",
      status: "fail",
      detail: model.message,
      fix: "every run fails until then",
    });
  } else {
    add({ check: "model", status: "ok", detail: model.id });
    if (priceTable) add(priceCheck(model.id, priceTable));
    if (input.modelCall === false) {
      add({ check: "model answers", status: "skip", detail: "--no-model-call" });
    } else {
      try {
        await generateText({
          model: model.model,
          prompt: "Answer with the single word: ok",
          maxOutputTokens: 16,
          maxRetries: 0,
          abortSignal: AbortSignal.timeout(input.modelTimeoutMs ?? 20_000),
        });
        add({ check: "model answers", status: "ok", detail: `${model.id} answered a tiny call` });
      } catch (error) {
        add({
          check: "model answers",
          status: "fail",
          detail: `${model.id} did not answer: ${describe(error).slice(0, 300)}`,
          fix: "check PEERGATE_MODEL_BASE_URL, PEERGATE_MODEL_API_KEY and that the model server runs; every run fails until it answers",
        });
      }
    }
  }

  // Database, and what lives in it.
  const secretKey = await readSecretKey(config);
  let database = input.database;
  let opened: Database | undefined;
  if (!database) {
    if (!config.databaseUrl && (await input.serverHoldsDatabase?.(config.dataDir)) === true) {
      add({
        check: "database",
        status: "skip",
        detail:
          "the running server holds the embedded database (it admits one process); the checks that read it ran at the server's start and are in its log",
      });
    } else {
      try {
        opened = await openConfiguredDatabase(config);
        database = opened;
      } catch (error) {
        add({
          check: "database",
          status: "fail",
          detail: `cannot open the database: ${describe(error)}`,
          fix: config.databaseUrl
            ? "check DATABASE_URL and that PostgreSQL accepts connections"
            : `check ${config.dataDir}/pg`,
        });
      }
    }
  }
  try {
    if (database) {
      const status = await migrationStatus(database);
      add(
        status.pending.length === 0
          ? {
              check: "database",
              status: "ok",
              detail: `reachable, ${status.applied} migrations applied`,
            }
          : {
              check: "database",
              status: status.applied === 0 ? "warn" : "fail",
              detail: `reachable; ${status.pending.length} migration(s) pending: ${status.pending.join(", ")}`,
              fix: "`peergate migrate`, or start the server, which applies them",
            },
      );
      if (status.pending.length === 0) {
        add(await adminTokenCheck(config, database.db));
        add(await operatorTokenCheck(database.db));
        add(await sealedSecretsCheck(secretKey, database.db));
      }
    }
  } catch (error) {
    add({ check: "database", status: "fail", detail: describe(error) });
  } finally {
    await opened?.close();
  }

  if (input.sandbox !== false) add(await sandboxCheck(config));
  add(publicUrlCheck(config));
  if (config.grpc) add(grpcCheck(config.grpc));
  return checks;
}

function priceCheck(modelId: string, table: PriceTable): DoctorCheck {
  const price = findModelPrice(table, modelId);
  if (price) {
    return {
      check: "model price",
      status: "ok",
      detail: `${modelId}: $${price.inputUsdPerMillionTokens} in, $${price.outputUsdPerMillionTokens} out per million tokens`,
    };
  }
  return {
    check: "model price",
    status: "warn",
    detail: `${modelId} has no price in policies/models.yaml: a run of any caller with a cost budget is refused (cost-unknown), and the default budgets have one ($${defaultBudgets.costUsd} per run, $${defaultBudgets.daily?.costUsd} a day)`,
    fix: `add  "${modelId}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }  under models: in policies/models.yaml (0 for a model you run yourself); a running server reads it again on save or SIGHUP`,
  };
}

async function readSecretKey(config: Config): Promise<SecretKey | undefined> {
  const text = config.secretKey ?? (await readSecretFile(config.dataDir, secretKeyFile));
  return text ? parseSecretKey(text) : undefined;
}

async function adminTokenCheck(config: Config, db: DbOrTx): Promise<DoctorCheck> {
  const rows = await db
    .select({ hash: credentials.secretHash })
    .from(credentials)
    .where(
      and(
        sql`${credentials.kind} = 'admin'`,
        isNull(credentials.revokedAt),
        isNull(credentials.callerId),
      ),
    );
  const fromFile = config.adminToken
    ? undefined
    : await readSecretFile(config.dataDir, adminTokenFile);
  const token = config.adminToken ?? fromFile;
  const source = config.adminToken ? "PEERGATE_ADMIN_TOKEN" : `${config.dataDir}/${adminTokenFile}`;
  if (rows.length === 0) {
    return {
      check: "admin token",
      status: "warn",
      detail: "none in the database yet",
      fix: `start the server: it adopts ${token ? source : "a new token written to the data directory"}`,
    };
  }
  if (!token) {
    return {
      check: "admin token",
      status: "warn",
      detail: "the database has one, but not this machine",
      fix: `set PEERGATE_ADMIN_TOKEN, or copy ${adminTokenFile} from the data directory of the instance that made it`,
    };
  }
  const hash = hashSecret(token);
  if (!rows.some((r) => safeEqual(r.hash, hash))) {
    return {
      check: "admin token",
      status: config.adminToken ? "warn" : "fail",
      detail: `${source} is not the database's admin token`,
      fix: config.adminToken
        ? "the server makes PEERGATE_ADMIN_TOKEN the admin token at its next start"
        : `start once with PEERGATE_ADMIN_TOKEN="$(cat ${source})" to make it the database's, or put the database's token there`,
    };
  }
  return { check: "admin token", status: "ok", detail: `from ${source}` };
}

async function operatorTokenCheck(db: DbOrTx): Promise<DoctorCheck> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(credentials)
    .where(
      and(
        sql`${credentials.kind} = 'operator'`,
        isNull(credentials.revokedAt),
        isNull(credentials.callerId),
      ),
    );
  return (row?.n ?? 0) > 0
    ? { check: "operator token", status: "ok", detail: "set (kept as a hash)" }
    : {
        check: "operator token",
        status: "warn",
        detail: "not created: approvals and widening a caller are refused until it is",
        fix: "`peergate operator-token create`, and keep what it prints with the operator",
      };
}

async function sealedSecretsCheck(key: SecretKey | undefined, db: DbOrTx): Promise<DoctorCheck> {
  const sealed = await db
    .select({ callerId: credentials.callerId, sealed: credentials.sealedSecret })
    .from(credentials)
    .where(and(isNotNull(credentials.sealedSecret), isNull(credentials.revokedAt)));
  if (sealed.length === 0)
    return { check: "secret key", status: "ok", detail: "no sealed GitHub secrets yet" };
  if (!key) {
    return {
      check: "secret key",
      status: "fail",
      detail: `${sealed.length} GitHub webhook secret(s) are sealed, but no secret key is here`,
      fix: "set PEERGATE_SECRET_KEY to the key of the instance that sealed them (or rotate those callers)",
    };
  }
  const unreadable = sealed.filter(
    (s) =>
      !s.callerId || !s.sealed || openSecret(key, s.sealed, sealContext(s.callerId)) === undefined,
  ).length;
  return unreadable === 0
    ? {
        check: "secret key",
        status: "ok",
        detail: `opens all ${sealed.length} sealed GitHub secret(s)`,
      }
    : {
        check: "secret key",
        status: "fail",
        detail: `the secret key (id ${key.id}) cannot open ${unreadable} of ${sealed.length} sealed GitHub secret(s): every delivery to those callers will be refused`,
        fix: "give this instance the PEERGATE_SECRET_KEY the other instances use, or rotate those callers",
      };
}

async function sandboxCheck(config: Config): Promise<DoctorCheck> {
  if (config.sandbox === "none") {
    return {
      check: "sandbox",
      status: "warn",
      detail: "PEERGATE_SANDBOX=none: processes started for runs are not confined",
      fix: "install bubblewrap and unset PEERGATE_SANDBOX",
    };
  }
  try {
    const backend = createSandboxBackend(config.sandbox, { dataDir: config.dataDir });
    const probe = await probeSandbox(backend, { workspace: config.workspace });
    return probe.ok
      ? { check: "sandbox", status: "ok", detail: `${backend.kind}: works` }
      : {
          check: "sandbox",
          status: "fail",
          detail: `${backend.kind}: ${probe.problem}`,
          fix: "see docs/sandbox.md; process tools are refused until it works",
        };
  } catch (error) {
    return {
      check: "sandbox",
      status: "fail",
      detail: describe(error),
      fix: "see docs/sandbox.md",
    };
  }
}

const loopbackHosts = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);

function publicUrlCheck(config: Config): DoctorCheck {
  const needs =
    "GitHub and IFTTT must reach <public URL>/webhooks/github/<caller> and /webhooks/ifttt/<caller> over https";
  if (!config.publicUrl) {
    return {
      check: "public URL",
      status: "warn",
      detail: `PEERGATE_PUBLIC_URL is not set: the agent card and the URLs printed for webhook callers name http://${config.host}:${config.port}. ${needs}`,
      fix: "put a TLS reverse proxy in front and set PEERGATE_PUBLIC_URL=https://<its name> (docs/operating.md)",
    };
  }
  const url = new URL(config.publicUrl);
  if (loopbackHosts.has(url.hostname)) {
    return {
      check: "public URL",
      status: "warn",
      detail: `${config.publicUrl} is loopback: only this machine reaches it. ${needs}`,
      fix: "set PEERGATE_PUBLIC_URL to the https name of the reverse proxy",
    };
  }
  if (url.protocol !== "https:") {
    return {
      check: "public URL",
      status: "warn",
      detail: `${config.publicUrl} is not https: IFTTT URLs carry their secret and GitHub signs but does not encrypt`,
      fix: "terminate TLS in a reverse proxy and use its https URL",
    };
  }
  return { check: "public URL", status: "ok", detail: `${config.publicUrl}. ${needs}` };
}

/** The A2A gRPC binding, named when it is on (PEERGATE_GRPC_PORT); plaintext, like HTTP. */
function grpcCheck(grpc: NonNullable<Config["grpc"]>): DoctorCheck {
  const bound = `${grpc.host.includes(":") ? `[${grpc.host}]` : grpc.host}:${grpc.port}`;
  const card = grpc.publicAddress ?? bound;
  const detail = `A2A over gRPC on ${bound} (the card names ${card}; A2A 1.0, bearer or JWT in the authorization metadata)`;
  if (!loopbackHosts.has(grpc.host) && grpc.publicAddress === undefined) {
    return {
      check: "gRPC binding",
      status: "warn",
      detail: `${detail}: plaintext on a non-loopback address, and the card names it as bound`,
      fix: "put a TLS proxy in front of the gRPC port and set PEERGATE_GRPC_PUBLIC_ADDRESS=<its host:port> (docs/a2a.md)",
    };
  }
  return { check: "gRPC binding", status: "ok", detail };
}

/** At start: every problem doctor finds, as one warning each (nothing is logged when all is well). */
export function logDoctorFindings(input: DoctorInput & { logger: Logger }): Promise<void> {
  return diagnose({ ...input, sandbox: false })
    .then((checks) => {
      for (const c of checks) {
        if (c.status === "warn" || c.status === "fail")
          input.logger.warn(`${c.check}: ${c.detail}`, c.fix ? { fix: c.fix } : {});
      }
    })
    .catch((error: unknown) => input.logger.warn("start-up checks failed", { error }));
}
