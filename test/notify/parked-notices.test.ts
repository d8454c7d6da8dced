// An operator not watching the console missed every parked run until it expired. Now a run that
// parks is noticed to PEERGATE_NOTIFY_URL (a Slack-compatible body, HMAC-signed), retried when the
// target fails, recorded in the audit trail, and noticed again when its window is about to close;
// the target is reached only under web_fetch's rules against request forgery. A real server.
import { createHmac } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { ConfigError } from "../../src/errors.ts";
import { silentLogger } from "../../src/log.ts";
import { safePost } from "../../src/notify/safe-post.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import {
  a2a,
  addCaller,
  copyPolicies,
  createSharedSecrets,
  instanceEnv,
  type ScriptedModel,
  sendMessageBody,
  startScriptedModel,
  taskRunId,
} from "../faults/support.ts";
import { createPostgresTestDatabase, postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";

type Received = { path: string; headers: IncomingHttpHeaders; body: string };

/** A notify target on loopback: answers 500 to the first `failFirst` requests, then 200. */
async function startReceiver(failFirst: number) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      res.statusCode = received.length <= failFirst ? 500 : 200;
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    received,
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const secret = "notify-secret-0123456789abcdef";
const parkSteps = [
  {
    text: "Writing it.",
    calls: [
      {
        id: "call_n1",
        name: "write_file",
        arguments: JSON.stringify({ path: "noticed.txt", content: "x\n" }),
      },
    ],
  },
  { text: "wrote noticed.txt" },
];

describe("notices for parked runs (pglite, a real server)", () => {
  let model: ScriptedModel;
  let policiesDir: string;
  let dataDir: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let server: RunningServer;
  const shared = createSharedSecrets();

  beforeAll(async () => {
    model = await startScriptedModel({ park: parkSteps });
    policiesDir = await copyPolicies();
    dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-notify-"));
    receiver = await startReceiver(1);
    const env = {
      ...instanceEnv({ ...shared, policiesDir, modelBaseUrl: model.baseUrl, dataDir }),
      PEERGATE_LOG_LEVEL: "silent",
      // The path stands for a Slack webhook's secret path: it must not reach the audit trail.
      PEERGATE_NOTIFY_URL: `${receiver.url}/hook/PATH-SECRET`,
      PEERGATE_NOTIFY_SECRET: secret,
      PEERGATE_NOTIFY_ALLOW_ADDRESSES: "127.0.0.1",
    };
    server = await startServer(loadConfig(env, dataDir), silentLogger, env);
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    await model?.close();
    await rm(dataDir, { recursive: true, force: true });
    await rm(`${dataDir}-workspace`, { recursive: true, force: true });
    await rm(policiesDir, { recursive: true, force: true });
  });

  const auditOf = async (kind: string) => {
    const res = await fetch(`${server.url}/admin/v1/audit?kind=${kind}`, {
      headers: { authorization: `Bearer ${shared.adminToken}` },
    });
    return ((await res.json()) as { events: { data: any }[] }).events;
  };

  it("notices a parked run once, signed, retried after a failure, audited; again near expiry", async () => {
    const instance = {
      url: server.url,
      dataDir,
      logs: [],
      server,
      admin: async (method: string, pathname: string, body?: unknown, headers = {}) => {
        const res = await fetch(`${server.url}/admin/v1${pathname}`, {
          method,
          headers: {
            authorization: `Bearer ${shared.adminToken}`,
            "content-type": "application/json",
            ...headers,
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: res.status, body: await res.json(), headers: res.headers, ms: 0 };
      },
      stop: async () => {},
    };
    const peer = await addCaller(instance, {
      name: "parker",
      kind: "peer",
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const sent = await a2a(server.url, peer.credential.secret, sendMessageBody("scenario:park"));
    expect(sent.body.result?.task?.status?.state).toBe("TASK_STATE_WORKING");
    const runId = taskRunId(sent.body.result.task) as string;

    // The first POST is answered 500; the retry gets 200.
    const audited = await eventually(
      "the parked notice in the audit trail",
      async () => (await auditOf("run.notified")).find((e) => e.data.notice === "parked"),
      { withinMs: 60_000 },
    );
    expect(audited.data).toMatchObject({
      runId,
      notice: "parked",
      targets: [{ target: receiver.url, status: "sent", attempts: 2 }],
    });
    expect(JSON.stringify(audited.data)).not.toContain("PATH-SECRET");

    const parked = receiver.received.filter((r) => r.headers["x-peergate-event"] === "run.parked");
    expect(parked).toHaveLength(2);
    const [first, retry] = parked as [Received, Received];
    expect(retry.headers["x-peergate-delivery"]).toBe(first.headers["x-peergate-delivery"]);
    expect(retry.path).toBe("/hook/PATH-SECRET");
    for (const r of parked) {
      const timestamp = r.headers["x-peergate-timestamp"] as string;
      const expected = `sha256=${createHmac("sha256", secret).update(`${timestamp}.${r.body}`).digest("hex")}`;
      expect(r.headers["x-peergate-signature"]).toBe(expected);
    }
    const body = JSON.parse(retry.body);
    expect(body.text).toContain(runId);
    expect(body.text).toContain(`peergate runs approve ${runId}`);
    expect(body.peergate).toMatchObject({ event: "run.parked", runId, caller: "parker" });

    // The window is about to close (as if hours passed): noticed once more, as expiring.
    await server.database.db.execute(
      sql`update runs set parked_until = now() + interval '10 minutes' where id = ${runId}`,
    );
    const expiring = await eventually(
      "the expiring notice",
      () => receiver.received.find((r) => r.headers["x-peergate-event"] === "run.expiring"),
      { withinMs: 60_000 },
    );
    expect(JSON.parse(expiring.body).peergate).toMatchObject({ event: "run.expiring", runId });
    await eventually(
      "the expiring notice in the audit trail",
      async () => (await auditOf("run.notified")).find((e) => e.data.notice === "expiring"),
      { withinMs: 60_000 },
    );
    // Never a second parked notice for the same call.
    expect(
      receiver.received.filter((r) => r.headers["x-peergate-event"] === "run.parked"),
    ).toHaveLength(2);
  });
});

describe("the notify target's egress", () => {
  it("refuses loopback, private and metadata targets unless exempted, and metadata always", async () => {
    const receiver = await startReceiver(0);
    try {
      const target = new URL(`${receiver.url}/x`);
      const refused = await safePost(target, "{}", {});
      expect(refused).toMatchObject({ ok: false });
      expect(receiver.received).toHaveLength(0);
      // A name that resolves to a private address is refused as the address would be.
      const rebound = await safePost(
        new URL("http://notify.example/"),
        "{}",
        {},
        {
          resolve: async () => [{ address: "8.8.8.8" }, { address: "10.0.0.5" }],
        },
      );
      expect(rebound).toMatchObject({ ok: false, reason: expect.stringContaining("10.0.0.5") });
      const metadata = await safePost(
        new URL("http://169.254.169.254/latest"),
        "{}",
        {},
        {
          allowAddresses: ["169.254.169.254"],
        },
      );
      expect(metadata).toMatchObject({ ok: false });
      expect(await safePost(target, "{}", {}, { allowAddresses: ["127.0.0.1"] })).toEqual({
        ok: true,
        status: 200,
      });
      expect(receiver.received).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });

  it("bad notify settings are configuration errors (read with every other setting, before anything opens), naming each variable", async () => {
    const cwd = await mkdtemp(path.join(os.tmpdir(), "peergate-notify-config-"));
    try {
      const dataDir = path.join(cwd, "data");
      const base = { PEERGATE_DATA_DIR: dataDir, PEERGATE_WORKSPACE: path.join(cwd, "ws") };
      const problems = (env: Record<string, string>) => {
        try {
          loadConfig({ ...base, ...env }, cwd);
        } catch (error) {
          if (error instanceof ConfigError) return error.problems.map((p) => p.message).join("\n");
          throw error;
        }
        return "";
      };
      // A URL without its secret; the secret's value is never echoed.
      const noSecret = problems({
        PEERGATE_NOTIFY_URL: "https://hooks.example/x",
        PEERGATE_NOTIFY_SECRET: "short-secret",
      });
      expect(noSecret).toMatch(/^PEERGATE_NOTIFY_SECRET=\(value hidden\): .*16 characters/);
      expect(noSecret).not.toContain("short-secret");
      expect(problems({ PEERGATE_NOTIFY_URL: "ftp://hooks.example/x" })).toMatch(
        /^PEERGATE_NOTIFY_URL="ftp:\/\/hooks.example\/x": expected http\(s\) URLs/,
      );
      expect(
        problems({
          PEERGATE_NOTIFY_URL: "https://hooks.example/x",
          PEERGATE_NOTIFY_SECRET: "0123456789abcdef",
          PEERGATE_NOTIFY_EXPIRING_WITHIN_MS: "soon",
        }),
      ).toMatch(/^PEERGATE_NOTIFY_EXPIRING_WITHIN_MS="soon": expected milliseconds/);
      expect(problems({ PEERGATE_NOTIFY_ALLOW_ADDRESSES: "intranet.example" })).toMatch(
        /^PEERGATE_NOTIFY_ALLOW_ADDRESSES=.*expected IP addresses/,
      );
      // Unset: no notices, and the server starts as before.
      expect(loadConfig(base, cwd).notify).toBeUndefined();
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  });
});

describe.skipIf(postgresSkipReason() !== undefined)(
  "notices with two instances on one PostgreSQL: one notice per parked run",
  () => {
    const rounds = 5;
    let model: ScriptedModel;
    let policiesDir: string;
    let database: Awaited<ReturnType<typeof createPostgresTestDatabase>>;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    const servers: RunningServer[] = [];
    const dirs: string[] = [];
    const shared = createSharedSecrets();

    beforeAll(async () => {
      const scenarios: Record<string, typeof parkSteps> = {};
      for (let i = 0; i < rounds; i++) scenarios[`park-${i}`] = parkSteps;
      model = await startScriptedModel(scenarios);
      policiesDir = await copyPolicies();
      database = await createPostgresTestDatabase();
      receiver = await startReceiver(0);
      for (let i = 0; i < 2; i++) {
        const dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-notify-pg-"));
        dirs.push(dataDir);
        const env = {
          ...instanceEnv({
            ...shared,
            policiesDir,
            modelBaseUrl: model.baseUrl,
            dataDir,
            databaseUrl: database.url,
          }),
          PEERGATE_LOG_LEVEL: "silent",
          PEERGATE_NOTIFY_URL: `${receiver.url}/hook`,
          PEERGATE_NOTIFY_SECRET: secret,
          PEERGATE_NOTIFY_ALLOW_ADDRESSES: "127.0.0.1",
        };
        servers.push(await startServer(loadConfig(env, dataDir), silentLogger, env));
      }
    }, 60_000);

    afterAll(async () => {
      await Promise.allSettled(servers.map((s) => s.stop()));
      await receiver?.close();
      await model?.close();
      await database?.drop();
      for (const dir of dirs) {
        await rm(dir, { recursive: true, force: true });
        await rm(`${dir}-workspace`, { recursive: true, force: true });
      }
      await rm(policiesDir, { recursive: true, force: true });
    });

    it(`${rounds} parked runs, both instances looking: each noticed exactly once`, async () => {
      const [a] = servers as [RunningServer, RunningServer];
      const created = await fetch(`${a.url}/admin/v1/callers`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${shared.adminToken}`,
          "content-type": "application/json",
        },
        body: JSON.stringify({ name: "parker", kind: "peer", approvalPolicy: "read-only" }),
      });
      expect(created.status).toBe(201);
      const token = ((await created.json()) as any).credential.secret as string;
      // allow write_file widens: grant it as the operator would.
      const operatorToken = await createOperatorToken({ services: a.services, actor: "system" });
      const widened = await fetch(`${a.url}/admin/v1/callers/parker`, {
        method: "PATCH",
        headers: {
          authorization: `Bearer ${shared.adminToken}`,
          "x-peergate-operator-token": operatorToken,
          "content-type": "application/json",
        },
        body: JSON.stringify({ allow: ["write_file"] }),
      });
      expect(widened.status).toBe(200);
      const runIds: string[] = [];
      for (let i = 0; i < rounds; i++) {
        const sent = await a2a(
          servers[i % 2]?.url as string,
          token,
          sendMessageBody(`scenario:park-${i}`),
        );
        expect(sent.body.result?.task?.status?.state).toBe("TASK_STATE_WORKING");
        runIds.push(taskRunId(sent.body.result.task) as string);
      }
      const audited = await eventually(
        "a notice for every parked run",
        async () => {
          const res = await fetch(`${a.url}/admin/v1/audit?kind=run.notified&limit=100`, {
            headers: { authorization: `Bearer ${shared.adminToken}` },
          });
          const events = ((await res.json()) as { events: { data: any }[] }).events;
          return events.length >= rounds ? events : undefined;
        },
        { withinMs: 60_000 },
      );
      expect(audited.map((e) => e.data.runId).sort()).toEqual([...runIds].sort());
      // Both instances looked at every run; each delivery reached the receiver once.
      const deliveries = receiver.received.map((r) => r.headers["x-peergate-delivery"]);
      expect(new Set(deliveries).size).toBe(deliveries.length);
      expect(deliveries).toHaveLength(rounds);
    });
  },
);
