// One push notification on the wire (A2A 1.0 §9.5 / 0.3 §9): a POST of the task to the config's
// url, in the shape of the version the config was registered over — for 1.0 a StreamResponse
// `{"task": …}` as `application/a2a+json`, for 0.3 the Task object as `application/json` — and
// authenticated the ways the spec describes:
//
// - the config's `token`, echoed in `X-A2A-Notification-Token` so the receiver can tell the
//   notification belongs to a config it set;
// - `authentication` with `credentials`: `Authorization: <scheme> <credentials>`;
// - `authentication` with the scheme `Bearer` and no credentials asks for peergate's own proof: a
//   JWT (EdDSA) signed with the card-signing key, whose public half is the JWKS at
//   /.well-known/jwks.json (named in the header as `kid` and `jku`). Claims: `iss` (peergate's
//   public URL), `aud` (the notification url), `iat`, `exp` (5 minutes), `jti` (the delivery id),
//   `taskId`, and `request_body_sha256` (hex) binding the token to this body.
//
// `X-A2A-Notification-Id` carries the delivery id: it is the same on every attempt of one
// delivery, so a receiver that got an attempt whose answer was lost can drop the repeat.
import { createHash } from "node:crypto";
import { type StreamResponse, Task, type TaskPushNotificationConfig } from "@a2a-js/sdk";
import { V03PushNotificationSerializer } from "@a2a-js/sdk/compat/v0_3/server";
import { V1PushNotificationSerializer } from "@a2a-js/sdk/server";
import { SignJWT } from "jose";
import { traceHeaders } from "../trace.ts";
import type { CardSigningKey } from "./card-signing.ts";

export type PushSigning = { key: CardSigningKey; issuer: string; jwksUrl: string };

export type PushRequest = {
  body: string;
  headers: Record<string, string>;
};

const serializers = {
  "1.0": new V1PushNotificationSerializer(),
  "0.3": new V03PushNotificationSerializer(),
} as const;

const jwtLifetimeSeconds = 300;

/** The body and headers of one delivery attempt. */
export async function buildPushRequest(input: {
  deliveryId: number;
  config: TaskPushNotificationConfig;
  wireVersion: string;
  task: Record<string, unknown>;
  signing: PushSigning | undefined;
  now?: Date;
}): Promise<PushRequest> {
  const task = Task.fromJSON(input.task);
  const serializer = input.wireVersion === "1.0" ? serializers["1.0"] : serializers["0.3"];
  const event: StreamResponse = { payload: { $case: "task", value: task } };
  const { body, contentType } = serializer.serialize(event, task);
  const headers: Record<string, string> = {
    "content-type": contentType,
    "content-length": String(Buffer.byteLength(body)),
    "user-agent": "peergate-push/0.1",
    "x-a2a-notification-id": String(input.deliveryId),
    // The delivery's span (src/a2a/push-worker.ts), so the receiver can join its trace.
    ...traceHeaders(),
  };
  if (input.config.token) headers["x-a2a-notification-token"] = input.config.token;
  const auth = input.config.authentication;
  if (auth?.scheme && auth.credentials) {
    headers.authorization = `${auth.scheme} ${auth.credentials}`;
  } else if (auth?.scheme.toLowerCase() === "bearer" && input.signing) {
    const now = Math.floor((input.now ?? new Date()).getTime() / 1000);
    const jwt = await new SignJWT({
      taskId: task.id,
      request_body_sha256: createHash("sha256").update(body).digest("hex"),
    })
      .setProtectedHeader({
        alg: "EdDSA",
        typ: "JWT",
        kid: input.signing.key.kid,
        jku: input.signing.jwksUrl,
      })
      .setIssuer(input.signing.issuer)
      .setAudience(input.config.url)
      .setIssuedAt(now)
      .setExpirationTime(now + jwtLifetimeSeconds)
      .setJti(String(input.deliveryId))
      .sign(input.signing.key.privateKey);
    headers.authorization = `Bearer ${jwt}`;
  }
  return { body, headers };
}
