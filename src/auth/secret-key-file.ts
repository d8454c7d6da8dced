// Where the key that seals GitHub webhook secrets (src/auth/sealed-secrets.ts) comes from:
// PEERGATE_SECRET_KEY when set, else `<data dir>/secret-key`, generated on the first start and
// kept owner-only (src/secret-files.ts). A key that does not parse stops start-up: running on
// with a new key would leave every stored GitHub secret unopenable.
import { ConfigError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { createSecretFile, readSecretFile, secretKeyFile } from "../secret-files.ts";
import { generateSecretKeyText, parseSecretKey, type SecretKey } from "./sealed-secrets.ts";

export async function loadSecretKey(options: {
  /** PEERGATE_SECRET_KEY. */
  readonly configured: string | undefined;
  readonly dataDir: string;
  /** Whether the database may be shared with other instances (DATABASE_URL is set). */
  readonly sharedDatabase: boolean;
  readonly logger: Logger;
}): Promise<SecretKey> {
  const { configured, dataDir, logger } = options;
  if (configured) {
    const key = parseSecretKey(configured);
    if (!key)
      throw new ConfigError([
        {
          field: "PEERGATE_SECRET_KEY",
          message: "PEERGATE_SECRET_KEY=(value hidden): not a 32-byte key",
        },
      ]);
    return key;
  }
  const text =
    (await readSecretFile(dataDir, secretKeyFile)) ??
    (await createSecretFile(dataDir, secretKeyFile, generateSecretKeyText()));
  const key = parseSecretKey(text);
  if (!key) {
    throw new ConfigError([
      {
        field: secretKeyFile,
        message: `${dataDir}/${secretKeyFile}: not a 32-byte key; remove it to have a new one generated (GitHub webhook callers must then be rotated)`,
      },
    ]);
  }
  if (options.sharedDatabase) {
    logger.warn(
      "PEERGATE_SECRET_KEY is not set: instances sharing this database must share one key, or GitHub signatures will fail on the others",
      { keyId: key.id },
    );
  }
  return key;
}
