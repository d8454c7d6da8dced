// Authenticating callers on every surface. Each function returns the caller or throws
// UnauthenticatedError carrying the real reason; the reason goes to the audit trail and the HTTP
// layer answers every failure with the same 401, so nothing tells a prober which names exist or
// why a credential failed.
import { createHmac } from "node:crypto";
import { and, eq, isNull, sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import { readBearer } from "../auth/bearer.ts";
import { verifyGithubSignature } from "../auth/github-signature.ts";
import {
  type JwksCache,
  type PeerJwtSettings,
  padPeerJwtVerification,
  verifyPeerJwt,
} from "../auth/jwt.ts";
import { openSecret } from "../auth/sealed-secrets.ts";
import { hashSecret, secretPattern } from "../auth/secrets.ts";
import { appendAuditEvent } from "../db/audit.ts";
import { type Caller, type CallerKind, type Credential, credentials } from "../db/schema.ts";
import { UnauthenticatedError } from "../errors.ts";
import { isCallerRevoked } from "../policy/caller-revoked.ts";
import type { CallerDirectory } from "./caller-directory.ts";
import { callerNamePattern } from "./caller-input.ts";
import type { ServiceContext } from "./context.ts";
import { isCredentialActive } from "./describe-caller.ts";
import { sealContext } from "./issue-credential.ts";
import { createJtiClaimer, type JtiClaimer } from "./jti-claims.ts";

export type AuthenticatedCaller = {
  caller: Caller;
  credentialId: string | null;
  method: "token" | "jwt" | "github-signature" | "ifttt-secret";
};

export type AuthDeps = {
  services: ServiceContext;
  directory: CallerDirectory;
  jwks: JwksCache;
};

export type AuthFailureContext = {
  surface: "a2a" | "webhook" | "github" | "ifttt" | "admin" | "operator";
  /** The caller name the request claimed, if any (the URL's, for webhooks). */
  claimedName?: string | undefined;
  source: string;
};

/**
 * The name a refused request claimed, as the audit trail keeps it. A mistyped URL puts a secret
 * where a name goes (`/webhooks/<token>`), and the trail is append-only: a secret written there
 * could never be removed. So only what could be a short caller name is kept as sent; anything
 * else (every secret peergate issues is 32 characters or more) is kept as its length.
 */
function recordableName(name: string): string {
  return callerNamePattern.test(name) && name.length < 24
    ? name
    : `(not recorded: ${name.length} characters)`;
}

/** What kind of credential a refused request presented, as the audit summary counts it. */
function credentialKindOf(failure: AuthFailureContext, reason: string): string {
  if (reason.startsWith("jwt-")) return "jwt";
  switch (failure.surface) {
    case "a2a":
      return "peer-token";
    case "webhook":
      return "webhook-token";
    case "github":
      return "github-signature";
    case "ifttt":
      return "ifttt-secret";
    case "admin":
      return "admin-token";
    case "operator":
      return "operator-token";
  }
}

/**
 * Records why a request was refused, then throws the one error every refusal becomes. With the
 * server's failure log the refusal goes into its source's summary (one audit event per window
 * and source: src/services/record-auth-failures.ts); without one, it is an event of its own.
 */
export async function refuse(
  services: ServiceContext,
  failure: AuthFailureContext,
  reason: string,
  caller?: Caller,
): Promise<never> {
  const claimedName = failure.claimedName ? recordableName(failure.claimedName) : undefined;
  const subject = caller ? `caller:${caller.id}` : null;
  if (services.authFailures) {
    services.authFailures.record({
      surface: failure.surface,
      source: failure.source,
      reason,
      credentialKind: credentialKindOf(failure, reason),
      claimedName,
      subject,
    });
    throw new UnauthenticatedError(reason);
  }
  try {
    await appendAuditEvent(services.db, {
      actor: "system",
      kind: "auth.failed",
      subject,
      data: {
        surface: failure.surface,
        reason,
        source: failure.source,
        ...(claimedName ? { claimedName } : {}),
      },
    });
  } catch (error) {
    // Losing the audit of a refusal must not turn the refusal into an acceptance or a 500.
    services.logger.error("could not audit an authentication failure", { error, reason });
  }
  throw new UnauthenticatedError(reason);
}

/** Why a matched credential may not be used now, or undefined if it may. */
function credentialProblem(
  match: { caller: Caller; credential: Credential },
  kinds: readonly CallerKind[],
  now: Date,
): string | undefined {
  if (match.credential.revokedAt !== null) return "credential-revoked";
  if (!isCredentialActive(match.credential, now)) return "credential-expired";
  if (isCallerRevoked(match.caller)) return "caller-revoked";
  if (!kinds.includes(match.caller.kind)) return `wrong-kind:${match.caller.kind}`;
  return undefined;
}

const looksLikeJwt = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** A2A: a peer's bearer token, or a JWT signed by the peer's key. */
export async function authenticatePeer(
  deps: AuthDeps,
  authorization: string | null | undefined,
  failure: AuthFailureContext,
): Promise<AuthenticatedCaller> {
  const { services } = deps;
  const bearer = readBearer(authorization);
  if (!bearer.ok) return refuse(services, failure, `authorization-${bearer.reason}`);
  if (looksLikeJwt.test(bearer.token)) return authenticatePeerJwt(deps, bearer.token, failure);
  return acceptSecret(deps, bearer.token, { kind: "peer", method: "token" }, failure);
}

/**
 * The one path for a presented secret: look it up by its SHA-256 (the index compares hashes, so
 * timing reveals nothing of the secret), then check the caller it belongs to, in a fixed order.
 */
async function acceptSecret(
  deps: AuthDeps,
  secret: string,
  expect: { kind: CallerKind; method: AuthenticatedCaller["method"]; name?: string },
  failure: AuthFailureContext,
): Promise<AuthenticatedCaller> {
  const { services } = deps;
  const match = await deps.directory.findByCredentialHash(hashSecret(secret));
  if (!match) return refuse(services, failure, "unknown-secret");
  if (expect.name !== undefined && match.caller.name !== expect.name) {
    return refuse(services, failure, "secret-of-another-caller", match.caller);
  }
  const problem = credentialProblem(match, [expect.kind], services.now());
  if (problem) return refuse(services, failure, problem, match.caller);
  return { caller: match.caller, credentialId: match.credential.id, method: expect.method };
}

async function authenticatePeerJwt(
  deps: AuthDeps,
  token: string,
  failure: AuthFailureContext,
): Promise<AuthenticatedCaller> {
  const { services } = deps;
  let issuer: unknown;
  try {
    issuer = decodeJwt(token).iss; // unverified: only selects whose key to verify with
  } catch {
    return refuse(services, failure, "jwt-malformed");
  }
  if (typeof issuer !== "string" || issuer.length === 0 || issuer.length > 512) {
    return refuse(services, failure, "jwt-no-issuer");
  }
  const candidates = await deps.directory.findByJwtIssuer(issuer);
  const caller = candidates.length === 1 ? candidates[0] : undefined;
  const jwt = caller?.jwt;
  if (!caller || !jwt || isCallerRevoked(caller)) {
    // Checked against a padding key first, so that this refusal takes as long as a known
    // issuer's bad signature: timing must not tell which issuers exist.
    await padPeerJwtVerification(token, services.now());
    if (caller && jwt) return refuse(services, failure, "caller-revoked", caller);
    return refuse(
      services,
      failure,
      candidates.length > 1 ? "jwt-issuer-ambiguous" : "jwt-unknown-issuer",
    );
  }
  const settings: PeerJwtSettings = {
    issuer: jwt.issuer,
    audience: jwt.audience,
    algorithms: jwt.algorithms as PeerJwtSettings["algorithms"],
    maxAgeSeconds: jwt.maxAgeSeconds,
    ...(jwt.jwksUrl ? { jwksUrl: jwt.jwksUrl } : {}),
    ...(jwt.jwk ? { publicKey: jwt.jwk } : jwt.pem ? { publicKey: jwt.pem } : {}),
  };
  const result = await verifyPeerJwt(token, settings, {
    now: services.now(),
    keySets: deps.jwks,
    claimJti: (iss, jti, expiresAt) => claimJti(services, iss, jti, expiresAt),
  });
  if (!result.ok) return refuse(services, failure, `jwt-${result.reason}`, caller);
  return { caller, credentialId: null, method: "jwt" };
}

/** One claimer per database, so that concurrent requests' claims share a statement. */
const jtiClaimers = new WeakMap<object, JtiClaimer>();

/** Claims (issuer, jti) once, grouped with concurrent claims (src/services/jti-claims.ts). */
function claimJti(
  services: ServiceContext,
  issuer: string,
  jti: string,
  expiresAt: Date,
): Promise<boolean> {
  let claimer = jtiClaimers.get(services.db);
  if (!claimer) {
    claimer = createJtiClaimer(services.db, services.now);
    jtiClaimers.set(services.db, claimer);
  }
  return claimer.claim(issuer, jti, expiresAt);
}

/** Generic webhook: `POST /webhooks/:name` with a bearer token of that caller. */
export async function authenticateWebhookToken(
  deps: AuthDeps,
  name: string,
  authorization: string | null | undefined,
  failure: AuthFailureContext,
): Promise<AuthenticatedCaller> {
  const bearer = readBearer(authorization);
  if (!bearer.ok) return refuse(deps.services, failure, `authorization-${bearer.reason}`);
  return acceptSecret(deps, bearer.token, { kind: "webhook", method: "token", name }, failure);
}

/** IFTTT: the secret is the last path segment (IFTTT cannot send headers). */
export async function authenticateIfttt(
  deps: AuthDeps,
  name: string,
  secret: string,
  failure: AuthFailureContext,
): Promise<AuthenticatedCaller> {
  if (!secretPattern.test(secret)) return refuse(deps.services, failure, "secret-malformed");
  return acceptSecret(deps, secret, { kind: "ifttt", method: "ifttt-secret", name }, failure);
}

/** What a GitHub caller name resolves to before the body is read: its active secrets, if any. */
export type GithubSecrets = {
  /** Whether the name is a GitHub caller with an active secret (so its body is worth reading). */
  readonly known: boolean;
  readonly match?: { caller: Caller; credential: Credential } | undefined;
  readonly active: readonly Credential[];
};

/** Looks up a GitHub caller's active secrets by name; needs no body, so it runs before reading one. */
export async function findGithubSecrets(deps: AuthDeps, name: string): Promise<GithubSecrets> {
  const { services } = deps;
  const now = services.now();
  // A name no caller can have is not looked up: PostgreSQL fails on some (a NUL byte from
  // `%00` in the URL), which would answer an unauthenticated prober 500 instead of 401.
  const rows = callerNamePattern.test(name)
    ? await services.db
        .select({ credential: credentials })
        .from(credentials)
        .where(
          and(
            eq(credentials.kind, "webhook-secret"),
            isNull(credentials.revokedAt),
            sql`${credentials.callerId} = (select id from callers where name = ${name} and kind = 'github')`,
          ),
        )
    : [];
  const active = rows.map((r) => r.credential).filter((c) => isCredentialActive(c, now));
  if (active.length === 0) return { known: false, active };
  const match = await deps.directory.findByCredentialHash(active[0]?.secretHash ?? "");
  return { known: match !== undefined, match, active };
}

/**
 * GitHub: the HMAC over the raw body under any of the caller's active secrets (more than one only
 * during a rotation's grace period). An unknown name still computes one HMAC, so the time taken
 * does not tell a prober whether the name exists.
 */
export async function verifyGithubDelivery(
  deps: AuthDeps,
  found: GithubSecrets,
  rawBody: Uint8Array,
  signature: string | null | undefined,
  failure: AuthFailureContext,
): Promise<AuthenticatedCaller> {
  const { services } = deps;
  const { match, active } = found;
  if (!match) {
    createHmac("sha256", "peergate-timing-pad").update(rawBody).digest();
    return refuse(services, failure, "unknown-github-caller");
  }
  const problem = credentialProblem(match, ["github"], services.now());
  if (problem) return refuse(services, failure, problem, match.caller);
  let lastReason = "signature-missing";
  for (const credential of active) {
    const secret = credential.sealedSecret
      ? openSecret(services.secretKey, credential.sealedSecret, sealContext(match.caller.id))
      : undefined;
    if (secret === undefined) {
      services.logger.error(
        "a GitHub webhook secret could not be opened: is PEERGATE_SECRET_KEY the key it was sealed with?",
        {
          caller: match.caller.name,
          credential: credential.prefix,
        },
      );
      lastReason = "secret-unsealable";
      continue;
    }
    const check = verifyGithubSignature(secret, rawBody, signature);
    if (check.ok)
      return { caller: match.caller, credentialId: credential.id, method: "github-signature" };
    lastReason = `signature-${check.reason}`;
  }
  return refuse(services, failure, lastReason, match.caller);
}

/** GitHub, in one step: the name's secrets, then the signature over `rawBody`. */
export async function authenticateGithub(
  deps: AuthDeps,
  name: string,
  rawBody: Uint8Array,
  signature: string | null | undefined,
  failure: AuthFailureContext,
): Promise<AuthenticatedCaller> {
  return verifyGithubDelivery(
    deps,
    await findGithubSecrets(deps, name),
    rawBody,
    signature,
    failure,
  );
}
