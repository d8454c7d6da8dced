// Push notification configs in Postgres (`push_configs`), the SDK's PushNotificationStore. Every
// read and write names the caller of the request, like the task store: another caller's config
// is absent. The SDK checks that the task exists for this caller before get, list, delete and
// create, so another caller's task is "task not found" (-32001) there.
//
// A config's `token` and `authentication.credentials` are the client's secrets for its own
// receiver: they are sealed with peergate's secret key (bound to caller, task and config id)
// and opened only to be sent to that receiver or returned to the caller that set them.
// Registration and removal are audit events (without the secrets).
import { randomUUID } from "node:crypto";
import { TaskPushNotificationConfig } from "@a2a-js/sdk";
import type {
  PushNotificationStore,
  ServerCallContext,
  StoredPushNotificationConfig,
} from "@a2a-js/sdk/server";
import { and, asc, eq, sql } from "drizzle-orm";
import { openSecret, type SecretKey, sealSecret } from "../auth/sealed-secrets.ts";
import { appendAuditEvent } from "../db/audit.ts";
import type { Db } from "../db/client.ts";
import { type PushConfigRow, pushConfigs } from "../db/schema.ts";
import { readCallerId } from "./call-context.ts";

export type PeergatePushStore = PushNotificationStore & {
  loadWithMetadata(
    taskId: string,
    context: ServerCallContext,
  ): Promise<StoredPushNotificationConfig[]>;
};

type Secrets = { token?: string; credentials?: string };

function sealContext(callerId: string, taskId: string, configId: string): string {
  return `push-config:${callerId}:${taskId}:${configId}`;
}

/** The config of a stored row, its secrets opened; undefined secrets when the key changed. */
export function openPushConfig(key: SecretKey, row: PushConfigRow): TaskPushNotificationConfig {
  const config = TaskPushNotificationConfig.fromJSON(row.config);
  if (row.sealedSecrets) {
    const opened = openSecret(
      key,
      row.sealedSecrets,
      sealContext(row.callerId, row.taskId, row.configId),
    );
    const secrets = opened ? (JSON.parse(opened) as Secrets) : {};
    config.token = secrets.token ?? "";
    if (config.authentication) config.authentication.credentials = secrets.credentials ?? "";
  }
  return config;
}

export function createPushStore(db: Db, key: SecretKey): PeergatePushStore {
  async function loadRows(taskId: string, context: ServerCallContext): Promise<PushConfigRow[]> {
    return db
      .select()
      .from(pushConfigs)
      .where(and(eq(pushConfigs.taskId, taskId), eq(pushConfigs.callerId, readCallerId(context))))
      .orderBy(asc(pushConfigs.createdAt), asc(pushConfigs.id));
  }

  return {
    async save(taskId, context, config) {
      const callerId = readCallerId(context);
      // The SDK reads the assigned id back from the object it passed (PushNotificationStore).
      if (!config.id) config.id = randomUUID();
      config.taskId = taskId;
      const secrets: Secrets = {};
      if (config.token) secrets.token = config.token;
      if (config.authentication?.credentials)
        secrets.credentials = config.authentication.credentials;
      const open = TaskPushNotificationConfig.toJSON({
        ...config,
        tenant: "",
        token: "",
        authentication: config.authentication && { ...config.authentication, credentials: "" },
      }) as Record<string, unknown>;
      const sealed =
        Object.keys(secrets).length > 0
          ? sealSecret(key, JSON.stringify(secrets), sealContext(callerId, taskId, config.id))
          : null;
      const wireVersion = context.requestedVersion === "1.0" ? "1.0" : "0.3";
      await db.transaction(async (tx) => {
        const written = await tx
          .insert(pushConfigs)
          .values({
            taskId,
            callerId,
            configId: config.id,
            config: open,
            sealedSecrets: sealed,
            wireVersion,
          })
          .onConflictDoUpdate({
            target: [pushConfigs.taskId, pushConfigs.configId],
            set: { config: open, sealedSecrets: sealed, wireVersion },
            setWhere: sql`${pushConfigs.callerId} = ${callerId}`,
          })
          .returning({ id: pushConfigs.id });
        if (written.length === 0) throw new Error("a push config id of another caller's task");
        await appendAuditEvent(tx, {
          actor: `caller:${callerId}`,
          kind: "push.config.set",
          subject: `task:${taskId}`,
          data: {
            configId: config.id,
            url: open.url,
            token: secrets.token !== undefined,
            scheme: config.authentication?.scheme ?? null,
            wireVersion,
          },
        });
      });
    },
    async load(taskId, context) {
      return (await loadRows(taskId, context)).map((row) => openPushConfig(key, row));
    },
    async loadWithMetadata(taskId, context) {
      return (await loadRows(taskId, context)).map((row) => ({
        config: openPushConfig(key, row),
        wireVersion: row.wireVersion,
      }));
    },
    async delete(taskId, context, configId) {
      const callerId = readCallerId(context);
      const filters = [eq(pushConfigs.taskId, taskId), eq(pushConfigs.callerId, callerId)];
      if (configId) filters.push(eq(pushConfigs.configId, configId));
      await db.transaction(async (tx) => {
        const removed = await tx
          .delete(pushConfigs)
          .where(and(...filters))
          .returning({ configId: pushConfigs.configId });
        if (removed.length === 0) return;
        await appendAuditEvent(tx, {
          actor: `caller:${callerId}`,
          kind: "push.config.deleted",
          subject: `task:${taskId}`,
          data: { configIds: removed.map((r) => r.configId) },
        });
      });
    },
  };
}
