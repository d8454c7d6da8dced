// The CLI's way to a running server: the admin API at PEERGATE_URL (else the URL a local
// `peergate serve` recorded in <data dir>/server-url, else http://127.0.0.1:PEERGATE_PORT) with
// the admin token from PEERGATE_ADMIN_TOKEN or, on the server's own machine, `<data dir>/admin-token`. Errors from the API come back as problem+json and are
// printed as the server phrased them, field problems included.
//
// Request and response types come from the admin API's contract (src/http/routes/admin-api*.ts),
// the schemas the server validates and documents with: `callAdmin(cli, "getCaller", …)` is typed
// end to end, and `AdminResponse<"listRuns">` names what a verb prints. Every verb calls through
// callAdmin (there is no untyped helper), so a changed response type fails to compile in the CLI.
// Only the types come from the contract: at run time the CLI reads each operation's method and
// path from admin-api-paths.ts, so a command does not load the server's schemas to send a request.
import { loadConfig } from "../config.ts";
import type { AdminOperation, AdminRequestBody, AdminResponse } from "../http/routes/admin-api.ts";
import { adminPaths } from "../http/routes/admin-api-paths.ts";
import { adminTokenFile, readSecretFile } from "../secret-files.ts";
import type { CliContext } from "./command.ts";
import { readServerUrl } from "./server-url.ts";

export class ApiError extends Error {
  readonly code = "api-error";
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, body: unknown, message: string) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }
}

export type AdminClient = {
  readonly baseUrl: string;
  request<T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<T>;
};

export async function createAdminClient(cli: CliContext): Promise<AdminClient> {
  const config = loadConfig(cli.env, cli.cwd);
  // PEERGATE_URL, else a PEERGATE_PORT given, else where a local `peergate serve` says it listens.
  const recorded = cli.env.PEERGATE_PORT ? undefined : await readServerUrl(config.dataDir);
  const baseUrl = (cli.env.PEERGATE_URL ?? recorded ?? `http://127.0.0.1:${config.port}`).replace(
    /\/+$/,
    "",
  );
  const token = config.adminToken ?? (await readSecretFile(config.dataDir, adminTokenFile));
  if (!token) {
    throw new Error(
      `no admin token: set PEERGATE_ADMIN_TOKEN, or run this on the server's machine where ${config.dataDir}/${adminTokenFile} exists`,
    );
  }
  return {
    baseUrl,
    async request<T>(
      method: string,
      path: string,
      body?: unknown,
      extraHeaders: Record<string, string> = {},
    ): Promise<T> {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}/admin/v1${path}`, {
          method,
          headers: {
            ...extraHeaders,
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(30_000),
        });
      } catch (error) {
        throw new Error(
          `cannot reach the peergate server at ${baseUrl} (${(error as Error).message}); is it running? Set PEERGATE_URL if it listens elsewhere`,
        );
      }
      const text = await res.text();
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : {};
      } catch {
        parsed = text;
      }
      if (!res.ok) throw new ApiError(res.status, parsed, describeProblem(res.status, parsed));
      return parsed as T;
    },
  };
}

function describeProblem(status: number, body: unknown): string {
  if (body && typeof body === "object") {
    const p = body as {
      code?: string;
      detail?: string;
      title?: string;
      problems?: { message: string }[];
    };
    const lines = [`${status} ${p.title ?? ""}: ${p.detail ?? ""}`.trim()];
    for (const problem of p.problems ?? []) lines.push(`  - ${problem.message}`);
    if (p.code === "operator-token-required") {
      lines.push(
        "The CLI sends the operator token from PEERGATE_OPERATOR_TOKEN or --operator-token-file.",
      );
    }
    return lines.join("\n");
  }
  return `${status}: ${String(body).slice(0, 200)}`;
}

export type { AdminOperation, AdminRequestBody, AdminResponse };

/** What one typed call names: the path's parameters, the query and the body its route declares. */
export type AdminCall<O extends AdminOperation> = {
  params?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
  body?: AdminRequestBody<O>;
  headers?: Record<string, string>;
};

/** The path of operation `op` with its parameters filled in and its query appended. */
export function adminPath<O extends AdminOperation>(op: O, call: AdminCall<O> = {}): string {
  const route = adminPaths[op];
  const path = route.path.replace(/\{(\w+)\}/g, (_, key: string) => {
    const value = call.params?.[key];
    if (value === undefined) throw new Error(`${op}: the path needs ${key}`);
    return encodeURIComponent(value);
  });
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(call.query ?? {})) {
    if (value !== undefined) query.set(key, String(value));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** One admin API call by operation name, typed from the contract. */
export async function callAdmin<O extends AdminOperation>(
  cli: CliContext,
  op: O,
  call: AdminCall<O> = {},
  client?: AdminClient,
): Promise<AdminResponse<O>> {
  const route = adminPaths[op];
  return (client ?? (await createAdminClient(cli))).request<AdminResponse<O>>(
    route.method.toUpperCase(),
    adminPath(op, call),
    call.body,
    call.headers,
  );
}
