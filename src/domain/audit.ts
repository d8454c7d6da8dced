// The audit trail's vocabulary: every kind of event peergate writes and every actor it names.
// `appendAuditEvent` (src/db/audit.ts) takes only these, so a new event kind is added here first,
// where a reader of the trail finds the whole list. Nothing here has a side effect.
import type { CallerChange } from "./caller.ts";
import type { RunStatus } from "./run.ts";

/**
 * What happened, dotted. `run.<status>` is written whenever a run reaches a status, so the trail
 * says how every run ended; the other `run.*` kinds are steps on the way.
 */
export type AuditKind =
  | "auth.failed"
  | `caller.${CallerChange}`
  | `${"admin" | "operator"}-token.created`
  | "admin-token.rotated"
  | `webhook.${"accepted" | "ignored" | "refused"}`
  | `run.${RunStatus | "started" | "approved" | "call-rejected" | "answer-refused" | "cancel-requested" | "notified" | "input-answered"}`
  | `tool.${"called" | "refused" | "declined" | "stage"}`
  | "caller.push-hosts.changed"
  | `push.${"config.set" | "config.deleted" | "delivered" | "failed"}`
  | "retention.pruned";

/** Who performs an admin action: the admin API, the operator's own token, the CLI on the host. */
export type AdminActor = "admin" | "operator" | `cli:${string}`;

/** Who performs a service verb: an admin actor, peergate itself, or a caller (its own runs). */
export type ServiceActor = AdminActor | "system" | `caller:${string}`;

/** Who acted, as the trail records it; `instance:<id>` executed, parked or recovered a run. */
export type AuditActor = ServiceActor | `instance:${string}`;
