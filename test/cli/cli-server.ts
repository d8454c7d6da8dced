// A real server (embedded database, or PostgreSQL when the test cluster runs) and a `cli(...)`
// that drives it as a user's terminal would, with the operator token in a file.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { commands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { loadConfig } from "../../src/config.ts";
import { type Logger, silentLogger } from "../../src/log.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

export const cliVariants = [
  { kind: "pglite" as const, skip: undefined as string | undefined },
  { kind: "postgres" as const, skip: postgresSkipReason() },
];

export type CliResult = { code: number; out: string; err: string };

export type CliServer = {
  dir: string;
  env: Record<string, string>;
  server: RunningServer;
  operatorFile: string;
  cli(...argv: string[]): Promise<CliResult>;
  json(...argv: string[]): Promise<any>;
  stop(): Promise<void>;
};

export async function startCliServer(
  kind: "pglite" | "postgres",
  {
    env: extra = {},
    logger = silentLogger,
  }: { env?: Record<string, string>; logger?: Logger } = {},
): Promise<CliServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "peergate-cli-"));
  const env: Record<string, string> = {
    PEERGATE_DATA_DIR: path.join(dir, "data"),
    PEERGATE_POLICIES_DIR: repoPoliciesDir,
    PEERGATE_PORT: "0",
    PEERGATE_LOG_LEVEL: "silent",
    ...extra,
  };
  let drop: (() => Promise<void>) | undefined;
  if (kind === "postgres") {
    const db = await createPostgresTestDatabase();
    env.DATABASE_URL = db.url;
    drop = db.drop;
  }
  const server = await startServer(loadConfig(env, dir), logger, env);
  env.PEERGATE_URL = server.url;
  const cli = async (...argv: string[]): Promise<CliResult> => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(commands, argv, {
      env,
      cwd: dir,
      io: { out: (t) => out.push(t), err: (t) => err.push(t) },
      signal: new AbortController().signal,
    });
    return { code, out: out.join("\n"), err: err.join("\n") };
  };
  const json = async (...argv: string[]) => {
    const r = await cli(...argv, "--json");
    if (r.code !== 0) throw new Error(`peergate ${argv.join(" ")} failed (${r.code}): ${r.err}`);
    return JSON.parse(r.out);
  };
  const created = await json("operator-token", "create");
  const operatorFile = path.join(dir, "operator-token");
  await writeFile(operatorFile, created.operatorToken, { mode: 0o600 });
  return {
    dir,
    env,
    server,
    operatorFile,
    cli,
    json,
    async stop() {
      await server.stop();
      await drop?.();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
