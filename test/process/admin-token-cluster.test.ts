// The admin token is the cluster's. An instance started with another PEERGATE_ADMIN_TOKEN against
// the shared database is refused (it used to replace the token for everyone, locking out every
// other instance's CLI and console), and `peergate admin-token rotate`, which needs the operator
// token, is the one way to change it: the new token works at once, the old one until its grace
// ends, and this machine's admin-token file follows.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { loadConfig } from "../../src/config.ts";
import { silentLogger } from "../../src/log.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";

const adminStatus = async (url: string, token: string) =>
  (await fetch(`${url}/admin/v1/callers`, { headers: { authorization: `Bearer ${token}` } }))
    .status;

const rotate = (url: string, token: string, headers: Record<string, string>, body = {}) =>
  fetch(`${url}/admin/v1/admin-token/rotate`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

const refusal = (start: Promise<RunningServer>) =>
  start.then(
    async (s) => {
      await s.stop();
      return "started";
    },
    (error: Error) => error.message,
  );

const tokenA = `pga_${"A".repeat(43)}`;
const tokenB = `pga_${"B".repeat(43)}`;

describe.skipIf(postgresSkipReason() !== undefined)("the cluster's admin token", () => {
  let dir: string;
  let databaseUrl: string;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-admin-token-"));
    ({ url: databaseUrl, drop } = await createPostgresTestDatabase());
  });
  afterAll(async () => {
    await drop?.();
    await rm(dir, { recursive: true, force: true });
  });

  const env = (name: string, extra: Record<string, string> = {}) => ({
    PEERGATE_DATA_DIR: path.join(dir, name),
    PEERGATE_POLICIES_DIR: repoPoliciesDir,
    PEERGATE_PORT: "0",
    PEERGATE_LOG_LEVEL: "silent",
    DATABASE_URL: databaseUrl,
    ...extra,
  });
  const start = (e: Record<string, string>) => startServer(loadConfig(e, dir), silentLogger, e);

  it("an instance with another token is refused and changes nothing; rotation needs the operator", async () => {
    const a = await start(env("a", { PEERGATE_ADMIN_TOKEN: tokenA }));
    try {
      // B, with a token of its own, does not start, says how to get the cluster's, and A's
      // holders are not locked out.
      const refused = await refusal(start(env("b", { PEERGATE_ADMIN_TOKEN: tokenB })));
      expect(refused).toContain("the admin token does not match the cluster's");
      expect(refused).toContain("peergate admin-token rotate");
      expect(await adminStatus(a.url, tokenA)).toBe(200);
      expect(await adminStatus(a.url, tokenB)).toBe(401);
      // B with the cluster's token starts (a second instance, as documented).
      const b = await start(env("b", { PEERGATE_ADMIN_TOKEN: tokenA }));
      await b.stop();

      // The admin token alone cannot rotate; a wrong operator token is a failed login.
      const alone = await rotate(a.url, tokenA, {});
      expect(alone.status).toBe(403);
      expect(((await alone.json()) as { code: string }).code).toBe("operator-token-required");
      const wrong = await rotate(a.url, tokenA, {
        "x-peergate-operator-token": `pgo_${"W".repeat(43)}`,
      });
      expect(wrong.status).toBe(401);
      expect(await adminStatus(a.url, tokenA)).toBe(200);

      // With the operator token and a grace period, both tokens work; the rotation is audited.
      const operator = await createOperatorToken({
        services: a.services,
        actor: "cli:test",
      });
      const reply = await rotate(
        a.url,
        tokenA,
        { "x-peergate-operator-token": operator },
        { graceSeconds: 600 },
      );
      expect(reply.status).toBe(200);
      const rotated = (await reply.json()) as { token: string; oldTokensExpireAt: string };
      expect(rotated.token).toMatch(/^pga_/);
      expect(await adminStatus(a.url, rotated.token)).toBe(200);
      expect(await adminStatus(a.url, tokenA)).toBe(200);
      const audit = await fetch(`${a.url}/admin/v1/audit?kind=admin-token.rotated`, {
        headers: { authorization: `Bearer ${rotated.token}` },
      });
      const events = ((await audit.json()) as { events: { kind: string; data: unknown }[] }).events;
      expect(events.map((e) => e.kind)).toContain("admin-token.rotated");
      expect(JSON.stringify(events)).not.toContain(rotated.token);

      // Rotating again with no grace: the previous two stop at once.
      const again = await rotate(a.url, rotated.token, { "x-peergate-operator-token": operator });
      const latest = ((await again.json()) as { token: string }).token;
      expect(await adminStatus(a.url, latest)).toBe(200);
      expect(await adminStatus(a.url, rotated.token)).toBe(401);
      expect(await adminStatus(a.url, tokenA)).toBe(401);

      // An instance restarted with the old token is refused; with the new one it starts.
      expect(await refusal(start(env("c", { PEERGATE_ADMIN_TOKEN: tokenA })))).toContain(
        "the admin token does not match the cluster's",
      );
      const c = await start(env("c", { PEERGATE_ADMIN_TOKEN: latest }));
      await c.stop();
    } finally {
      await a.stop();
    }
  }, 120_000);

  it("`peergate admin-token rotate` prints the new token once and updates this machine's file", async () => {
    // A database of its own: the first instance on it makes the token and writes the file.
    const own = await createPostgresTestDatabase();
    const e = env("d", { DATABASE_URL: own.url });
    const d = await start(e);
    try {
      const file = path.join(e.PEERGATE_DATA_DIR, "admin-token");
      const old = (await readFile(file, "utf8")).trim();
      const operatorFile = path.join(dir, "operator-token");
      await writeFile(
        operatorFile,
        await createOperatorToken({ services: d.services, actor: "cli:test" }),
        { mode: 0o600 },
      );
      const out: string[] = [];
      const err: string[] = [];
      const cliEnv = { ...e, PEERGATE_URL: d.url };
      const run = (...argv: string[]) =>
        runCli(commands, argv, {
          env: cliEnv,
          cwd: dir,
          io: { out: (t) => out.push(t), err: (t) => err.push(t) },
          signal: new AbortController().signal,
        });

      // Without the operator token: refused, naming it; the file is untouched.
      expect(await run("admin-token", "rotate")).toBe(1);
      expect(err.join("\n")).toContain("operator token");
      expect((await readFile(file, "utf8")).trim()).toBe(old);

      // A bad --grace is a usage error that names the option and the range.
      expect(await run("admin-token", "rotate", "--grace", "soon")).toBe(2);
      expect(err.join("\n")).toContain("--grace");

      out.length = 0;
      expect(
        await run("admin-token", "rotate", "--operator-token-file", operatorFile, "--json"),
      ).toBe(0);
      const printed = JSON.parse(out.join("\n")) as { token: string; writtenTo: string | null };
      expect(printed.writtenTo).toBe("admin-token");
      expect((await readFile(file, "utf8")).trim()).toBe(printed.token);
      expect(await adminStatus(d.url, printed.token)).toBe(200);
      expect(await adminStatus(d.url, old)).toBe(401);
    } finally {
      await d.stop();
      await own.drop();
    }
  }, 120_000);
});
