// Issuing a caller's credential: a fresh secret of the kind its transport can carry, stored only
// as SHA-256 (GitHub secrets also sealed, since HMAC verification needs the secret itself). The
// secret is returned to the admin once and never again.

import { sealSecret } from "../auth/sealed-secrets.ts";
import { displayPrefix, generateSecret, hashSecret, type SecretKind } from "../auth/secrets.ts";
import type { DbTransaction } from "../db/client.ts";
import { type Caller, type CallerKind, type CredentialKind, credentials } from "../db/schema.ts";
import type { ServiceContext } from "./context.ts";

const secretKinds: Record<CallerKind, { secret: SecretKind; credential: CredentialKind }> = {
  peer: { secret: "peerToken", credential: "token" },
  webhook: { secret: "webhookToken", credential: "token" },
  github: { secret: "githubSecret", credential: "webhook-secret" },
  ifttt: { secret: "iftttSecret", credential: "ifttt-secret" },
};

/** The credential as the admin receives it, once. */
export type IssuedCredential = {
  id: string;
  kind: CredentialKind;
  prefix: string;
  /** The secret itself. Shown once; peergate keeps only its hash. */
  secret: string;
  /** How to use it, ready to paste. */
  usage: string;
  /** IFTTT: the full URL to paste into the applet (it carries the secret). */
  url?: string;
};

/** The AAD binding a sealed secret to its caller, so a sealed value cannot be moved to another. */
export function sealContext(callerId: string): string {
  return `peergate:github-secret:${callerId}`;
}

export async function issueCredential(
  tx: DbTransaction,
  services: Pick<ServiceContext, "secretKey" | "publicUrl">,
  caller: Pick<Caller, "id" | "name" | "kind">,
): Promise<IssuedCredential> {
  const kinds = secretKinds[caller.kind];
  const secret = generateSecret(kinds.secret);
  const [row] = await tx
    .insert(credentials)
    .values({
      callerId: caller.id,
      kind: kinds.credential,
      secretHash: hashSecret(secret),
      prefix: displayPrefix(secret),
      sealedSecret:
        caller.kind === "github"
          ? sealSecret(services.secretKey, secret, sealContext(caller.id))
          : null,
    })
    .returning({ id: credentials.id });
  if (!row) throw new Error("credential insert returned nothing");
  const base = { id: row.id, kind: kinds.credential, prefix: displayPrefix(secret), secret };
  switch (caller.kind) {
    case "peer":
      return {
        ...base,
        usage: `A2A requests to ${services.publicUrl}/a2a with "Authorization: Bearer <secret>"`,
      };
    case "webhook":
      return {
        ...base,
        usage: `POST ${services.publicUrl}/webhooks/${caller.name} with "Authorization: Bearer <secret>"`,
      };
    case "github":
      return {
        ...base,
        usage: `GitHub webhook: payload URL ${services.publicUrl}/webhooks/github/${caller.name}, content type application/json, secret <secret>`,
      };
    case "ifttt": {
      const url = `${services.publicUrl}/webhooks/ifttt/${caller.name}/${secret}`;
      return { ...base, url, usage: 'IFTTT "Make a web request": paste the URL, method POST' };
    }
  }
}
