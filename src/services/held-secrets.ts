// Every secret this server holds, for the redactor that cleans process output and tool results
// (src/sandbox/redact.ts): the model API key, the admin token (configured, generated or in its
// file), the secret key, the DATABASE_URL password, every variable of the environment whose
// name looks secret, and the plaintext of every sealed GitHub webhook secret in the database,
// opened at start. Secrets that appear later (a webhook secret or operator token issued after
// start, by this instance or another) are not listed here: they have the shape of a credential
// peergate generates, and the server's redactor replaces that shape whatever the value.
import { isNotNull } from "drizzle-orm";
import { openSecret, type SecretKey } from "../auth/sealed-secrets.ts";
import type { Db } from "../db/client.ts";
import { credentials } from "../db/schema.ts";
import { sealContext } from "./issue-credential.ts";

/** The plaintext of every sealed webhook secret this key opens (revoked ones too). */
export async function openSealedWebhookSecrets(db: Db, key: SecretKey): Promise<string[]> {
  const rows = await db
    .select({ callerId: credentials.callerId, sealed: credentials.sealedSecret })
    .from(credentials)
    .where(isNotNull(credentials.sealedSecret));
  return rows.flatMap(({ callerId, sealed }) => {
    if (callerId === null || sealed === null) return [];
    const secret = openSecret(key, sealed, sealContext(callerId));
    return secret === undefined ? [] : [secret];
  });
}

/**
 * `known` (the configuration's secrets, the data directory's files, DATABASE_URL's password, the
 * environment's secret-looking variables; undefined: not set), the secret key in each encoding it
 * can be given in, and every sealed webhook secret's plaintext.
 */
export async function heldSecrets(options: {
  readonly db: Db;
  readonly secretKey: SecretKey;
  readonly known: readonly (string | undefined)[];
}): Promise<string[]> {
  return [
    ...options.known.filter((s): s is string => s !== undefined),
    options.secretKey.bytes.toString("hex"),
    options.secretKey.bytes.toString("base64url"),
    options.secretKey.bytes.toString("base64"),
    ...(await openSealedWebhookSecrets(options.db, options.secretKey)),
  ];
}
