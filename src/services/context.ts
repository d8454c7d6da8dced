// What every service verb receives: plain values and ports, never a web framework's context.
// Built once by the core (src/core.ts) and by tests.

import type { SecretKey } from "../auth/sealed-secrets.ts";
import type { Database, Db } from "../db/client.ts";
import type { ServiceActor } from "../domain/audit.ts";
import type { RetentionSettings } from "../domain/retention.ts";
import type { LoadedPolicies } from "../load-policies.ts";
import type { Logger } from "../log.ts";
import type { CeilingCache } from "../policy/ceiling-cache.ts";
import type { CallerEvent } from "./caller-events.ts";
import type { AuthFailureLog } from "./record-auth-failures.ts";

export type ServiceContext = {
  readonly database: Database;
  readonly db: Db;
  readonly now: () => Date;
  readonly logger: Logger;
  readonly policies: LoadedPolicies;
  readonly ceilings: CeilingCache;
  /** Seals GitHub webhook secrets (src/auth/sealed-secrets.ts). */
  readonly secretKey: SecretKey;
  /** The URL callers reach this server at, for IFTTT URLs and the agent card. No trailing slash. */
  readonly publicUrl: string;
  /** Told after a caller change commits on this instance (the caller directory forgets it). */
  readonly callerChanged?: ((event: CallerEvent) => void) | undefined;
  /** How long each table family is kept (src/config.ts); absent: the defaults. */
  readonly retention?: RetentionSettings | undefined;
  /** Failed authentications, audited as summaries; without it, one event per failure. */
  readonly authFailures?: AuthFailureLog | undefined;
};

/** Who performs an admin action, as the audit trail records it (src/domain/audit.ts). */
export type Actor = ServiceActor;
