// The control socket's language: one JSON line in, one JSON line out, then the connection closes.
// It has two verbs and nothing else, so there is nothing to route, negotiate or upgrade: a request
// that is not exactly one of them (an HTTP request line included) is refused before anything is
// done. The socket lives in the data directory; its file permissions are the authority (whoever
// can open it could read the embedded database's files anyway), and it is never on TCP.
import path from "node:path";
import { z } from "zod";

export const controlSocketFile = "control.sock";

/** A Unix socket path must fit in sockaddr_un (108 bytes on Linux, 104 on macOS). */
export const maxSocketPathBytes = 100;

/** A request is one short line; anything longer is not a control request. */
export const maxRequestBytes = 1024;

export function controlSocketPath(dataDir: string): string {
  return path.join(path.resolve(dataDir), controlSocketFile);
}

export const controlRequestSchema = z.discriminatedUnion("verb", [
  z.strictObject({ verb: z.literal("ping") }),
  z.strictObject({
    verb: z.literal("operator-token.create"),
    /** Replace an existing operator token (which stops working at once). */
    force: z.boolean().default(false),
    /** Who asks, as the audit trail records it (`cli:<user>`). */
    user: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/)
      .optional(),
  }),
]);
export type ControlRequest = z.input<typeof controlRequestSchema>;

export type ControlResponse =
  | { ok: true; verb: "ping"; pid: number }
  | { ok: true; verb: "operator-token.create"; operatorToken: string; replaced: boolean }
  | { ok: false; code: "exists" | "refused" | "failed"; message: string };

export const controlVerbs = ["ping", "operator-token.create"] as const;
