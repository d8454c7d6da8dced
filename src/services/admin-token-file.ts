// The admin token on this machine. PEERGATE_ADMIN_TOKEN, when set, is the only admin credential;
// otherwise one is generated on the first start and written to `<data dir>/admin-token` (owner
// only, src/secret-files.ts) so the CLI here can read it. The database keeps only its hash
// (src/services/admin-credentials.ts), so a file that holds another token is refused: it would
// never authenticate.
import { ConfigError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { adminTokenFile, createSecretFile, readSecretFile } from "../secret-files.ts";
import { ensureAdminToken } from "./admin-credentials.ts";
import type { ServiceContext } from "./context.ts";

/** Makes sure an admin token exists and, when one was generated, that its file holds it. */
export async function settleAdminToken(options: {
  readonly ctx: Pick<ServiceContext, "db" | "now">;
  /** PEERGATE_ADMIN_TOKEN. */
  readonly configured: string | undefined;
  readonly dataDir: string;
  readonly logger: Logger;
}): Promise<{ generated?: string }> {
  const { dataDir, logger } = options;
  const admin = await ensureAdminToken({ ctx: options.ctx, configured: options.configured });
  if (admin.generated) {
    const stored = await createSecretFile(dataDir, adminTokenFile, admin.generated);
    if (stored !== admin.generated) {
      throw new ConfigError([
        {
          field: adminTokenFile,
          message: `${dataDir}/${adminTokenFile} exists but holds no admin token this database knows; remove it and restart`,
        },
      ]);
    }
    logger.info("admin token generated", { file: `${dataDir}/${adminTokenFile}` });
  } else if (admin.source === "stored" && !(await readSecretFile(dataDir, adminTokenFile))) {
    logger.warn("the admin token is not known on this machine: set PEERGATE_ADMIN_TOKEN", {});
  }
  return admin.generated ? { generated: admin.generated } : {};
}
