// The admin's view of a caller: everything about it except secrets. Credentials appear by id,
// kind, display prefix and state.
import type { Caller, Credential } from "../db/schema.ts";
import { defaultNobodyThere } from "../policy/overrides.ts";

export type CredentialView = {
  id: string;
  kind: Credential["kind"];
  prefix: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  active: boolean;
};

export type CallerView = {
  id: string;
  name: string;
  kind: Caller["kind"];
  tier: Caller["tier"];
  revoked: boolean;
  allow: string[];
  approvalPolicy: Caller["approvalPolicy"];
  budgets: Caller["budgets"];
  promptTemplate: string | null;
  eventFilter: string[] | null;
  jwt: Caller["jwt"];
  /** Command allowlist entries, per-tool overrides, URL grants, park or decline (DESIGN §10). */
  commands: string[];
  toolOverrides: Record<string, string>;
  urlGrants: Caller["urlGrants"];
  whenNobody: "park" | "decline";
  /** `off`: the command risk classifier never rates this caller's commands. */
  classifier: "on" | "off";
  version: number;
  createdAt: string;
  updatedAt: string;
  revokedAt: string | null;
  credentials: CredentialView[];
};

export function isCredentialActive(credential: Credential, now: Date): boolean {
  return (
    credential.revokedAt === null &&
    (credential.expiresAt === null || credential.expiresAt.getTime() > now.getTime())
  );
}

export function describeCredential(credential: Credential, now: Date): CredentialView {
  return {
    id: credential.id,
    kind: credential.kind,
    prefix: credential.prefix,
    createdAt: credential.createdAt.toISOString(),
    expiresAt: credential.expiresAt?.toISOString() ?? null,
    revokedAt: credential.revokedAt?.toISOString() ?? null,
    active: isCredentialActive(credential, now),
  };
}

export function describeCaller(
  caller: Caller,
  creds: readonly Credential[],
  now: Date,
): CallerView {
  return {
    id: caller.id,
    name: caller.name,
    kind: caller.kind,
    tier: caller.tier,
    revoked: caller.revokedAt !== null,
    allow: caller.allow,
    approvalPolicy: caller.approvalPolicy,
    budgets: caller.budgets,
    promptTemplate: caller.promptTemplate,
    eventFilter: caller.eventFilter,
    jwt: caller.jwt,
    commands: caller.commands,
    toolOverrides: caller.toolOverrides,
    urlGrants: caller.urlGrants,
    whenNobody: caller.whenNobody ?? defaultNobodyThere(caller.kind),
    classifier: caller.classifier ?? "on",
    version: caller.version,
    createdAt: caller.createdAt.toISOString(),
    updatedAt: caller.updatedAt.toISOString(),
    revokedAt: caller.revokedAt?.toISOString() ?? null,
    credentials: creds.map((c) => describeCredential(c, now)),
  };
}
