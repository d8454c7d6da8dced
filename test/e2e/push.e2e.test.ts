// Push notifications end to end (issue 16): the real server, a receiver started here on
// 127.0.0.1 (allowed by the server's egress list, PEERGATE_PUSH_ALLOW_ADDRESSES, and by the
// caller's push grant), the a2a-js client over both transports and raw JSON-RPC over HTTP.
import { createHash } from "node:crypto";
import { type AgentCard, type Task, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { createRemoteJWKSet, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { eventually } from "../support/eventually.ts";
import {
  isTerminalPush,
  type PushReceiver,
  readPushedTask,
  startPushReceiver,
} from "./push-receiver.ts";
import {
  addCaller,
  asTask,
  copyPolicies,
  createSharedSecrets,
  createWorkspace,
  type Peergate,
  removeTempDirs,
  type ScriptedModel,
  startPeergate,
  startScriptedModel,
  userMessage,
} from "./support.ts";

const scenarios = { answer: [{ text: "All done." }] };

function pushConfig(url: string, extra: Record<string, unknown> = {}) {
  return { tenant: "", id: "", taskId: "", url, token: "", authentication: undefined, ...extra };
}

async function rawRpc(
  peergate: Peergate,
  secret: string,
  method: string,
  params: unknown,
  version = "1.0",
): Promise<any> {
  const response = await fetch(`${peergate.url}/a2a`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${secret}`,
      "content-type": "application/json",
      ...(version ? { "A2A-Version": version } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return response.json();
}

async function legacyClient(peergate: Peergate, secret: string) {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("Authorization", `Bearer ${secret}`);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
    }),
  );
  const card = (await (
    await fetch(`${peergate.url}/.well-known/agent-card.json`)
  ).json()) as AgentCard;
  return factory.createFromAgentCard(card);
}

function nth<T>(list: readonly T[], index: number): T {
  const item = list.at(index);
  if (item === undefined) throw new Error(`no item ${index} in a list of ${list.length}`);
  return item;
}

/** Deliveries of one task, in arrival order, once its terminal one arrived. */
function deliveriesOf(receiver: PushReceiver, taskId: string) {
  return eventually(`the terminal push of task ${taskId}`, () => {
    const mine = receiver.received.filter((p) => readPushedTask(p).id === taskId);
    return mine.some((p) => isTerminalPush(p) && p.answered === 200) ? mine : undefined;
  });
}

describe("push notifications", () => {
  let model: ScriptedModel;
  let peergate: Peergate;
  let strict: Peergate;
  let receiver: PushReceiver;
  let alice: { secret: string };
  let bob: { secret: string };
  let carol: { secret: string };
  let strictAlice: { secret: string };

  async function grantPush(target: Peergate, name: string, hosts: string[]) {
    const operatorToken = await createOperatorToken({
      services: target.server.services,
      actor: "system",
    });
    const set = await target.admin(
      "PUT",
      `/callers/${name}/push-hosts`,
      { hosts },
      { "x-peergate-operator-token": operatorToken },
    );
    expect(set.status).toBe(200);
  }

  beforeAll(async () => {
    receiver = await startPushReceiver();
    model = await startScriptedModel(scenarios);
    const common = {
      ...createSharedSecrets(),
      policiesDir: await copyPolicies(),
      workspace: await createWorkspace(),
      modelBaseUrl: model.baseUrl,
    };
    peergate = await startPeergate({
      ...common,
      env: { PEERGATE_PUSH_ALLOW_ADDRESSES: "127.0.0.1", PEERGATE_PUSH_RETRY_MS: "50" },
    });
    strict = await startPeergate({ ...common, ...createSharedSecrets() });
    alice = await addCaller(peergate, { name: "alice", kind: "peer", tier: "public" });
    bob = await addCaller(peergate, { name: "bob", kind: "peer", tier: "public" });
    carol = await addCaller(peergate, { name: "carol", kind: "peer", tier: "public" });
    strictAlice = await addCaller(strict, { name: "alice", kind: "peer", tier: "public" });
    await grantPush(peergate, "alice", [receiver.origin]);
    await grantPush(peergate, "bob", [receiver.origin]);
    await grantPush(strict, "alice", [receiver.origin]);
    // Two servers with embedded PostgreSQL start here; on a loaded machine that takes a while.
  }, 180_000);

  afterAll(async () => {
    await Promise.allSettled([peergate?.stop(), strict?.stop()]);
    await Promise.allSettled([model?.close(), receiver?.close()]);
    await removeTempDirs();
  });

  it("is declared on the card in both shapes", async () => {
    const v1: any = await (
      await fetch(`${peergate.url}/.well-known/agent-card.json`, {
        headers: { "A2A-Version": "1.0" },
      })
    ).json();
    const v03: any = await (await fetch(`${peergate.url}/.well-known/agent-card.json`)).json();
    expect(v1.capabilities.pushNotifications).toBe(true);
    expect(v03.capabilities.pushNotifications).toBe(true);
  });

  it("creates, gets, lists and deletes configs with the a2a-js client, scoped to the caller", async () => {
    const client = await peergate.client(alice.secret);
    const task = asTask(
      await client.sendMessage({
        tenant: "",
        message: userMessage("scenario:answer crud"),
        configuration: undefined,
        metadata: undefined,
      }),
    );
    const created = await client.createTaskPushNotificationConfig(
      pushConfig(receiver.url, { taskId: task.id, id: "mine", token: "tok-1" }),
    );
    expect(created).toMatchObject({ id: "mine", taskId: task.id, url: receiver.url });
    const second = await client.createTaskPushNotificationConfig(
      pushConfig(receiver.url, { taskId: task.id }),
    );
    expect(second.id).not.toBe("");
    const got = await client.getTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      id: "mine",
    });
    expect(got).toMatchObject({ id: "mine", url: receiver.url, token: "tok-1" });
    const listed = await client.listTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      pageSize: 0,
      pageToken: "",
    });
    expect(listed.configs.map((c) => c.id).sort()).toEqual(["mine", second.id].sort());

    // Another caller sees neither the task nor its configs: -32001, as for no task at all.
    for (const [method, params] of [
      ["GetTaskPushNotificationConfig", { taskId: task.id, id: "mine" }],
      ["ListTaskPushNotificationConfigs", { taskId: task.id }],
      ["DeleteTaskPushNotificationConfig", { taskId: task.id, id: "mine" }],
      ["CreateTaskPushNotificationConfig", { taskId: task.id, url: receiver.url }],
    ] as const) {
      const reply = await rawRpc(peergate, bob.secret, method, params);
      expect(reply.error?.code, method).toBe(-32001);
    }
    const still = await client.listTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      pageSize: 0,
      pageToken: "",
    });
    expect(still.configs).toHaveLength(2);

    await client.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "mine" });
    const after = await rawRpc(peergate, alice.secret, "ListTaskPushNotificationConfigs", {
      taskId: task.id,
    });
    expect(after.result.configs.map((c: { id: string }) => c.id)).toEqual([second.id]);
  });

  it("refuses a target outside the caller's push grants, and a caller with none", async () => {
    const client = await peergate.client(alice.secret);
    const task = asTask(
      await client.sendMessage({
        tenant: "",
        message: userMessage("scenario:answer grants"),
        configuration: undefined,
        metadata: undefined,
      }),
    );
    const other = await rawRpc(peergate, alice.secret, "CreateTaskPushNotificationConfig", {
      taskId: task.id,
      url: "https://hooks.example.org/a2a",
    });
    expect(other.error?.code).toBe(-32602);
    expect(other.error?.message).toContain("outside the hosts");

    // Granting push hosts widens what a caller may do: the admin token alone does not.
    const widen = await peergate.admin("PUT", "/callers/carol/push-hosts", {
      hosts: [receiver.origin],
    });
    expect(widen.status).toBe(401);
    expect((await peergate.admin("GET", "/callers/carol/push-hosts")).body).toEqual({ hosts: [] });

    const before = receiver.received.length;
    const refused = await rawRpc(peergate, carol.secret, "SendMessage", {
      message: {
        messageId: crypto.randomUUID(),
        role: "ROLE_USER",
        parts: [{ text: "scenario:answer no grant" }],
      },
      configuration: { taskPushNotificationConfig: { url: receiver.url } },
    });
    expect(refused.error?.code).toBe(-32602);
    // Refused before a task or a run existed.
    const tasks = await rawRpc(peergate, carol.secret, "ListTasks", {});
    expect(tasks.result.tasks ?? []).toHaveLength(0);
    expect(receiver.received.length).toBe(before);
  });

  it("refuses a loopback target when the operator's egress list does not allow it", async () => {
    const before = receiver.received.length;
    const reply = await rawRpc(strict, strictAlice.secret, "SendMessage", {
      message: {
        messageId: crypto.randomUUID(),
        role: "ROLE_USER",
        parts: [{ text: "scenario:answer strict" }],
      },
      configuration: { taskPushNotificationConfig: { url: receiver.url } },
    });
    expect(reply.error?.code).toBe(-32602);
    expect(reply.error?.message).toContain("loopback");
    const metadata = await rawRpc(strict, strictAlice.secret, "SendMessage", {
      message: {
        messageId: crypto.randomUUID(),
        role: "ROLE_USER",
        parts: [{ text: "scenario:answer metadata" }],
      },
      configuration: { taskPushNotificationConfig: { url: "http://169.254.169.254/latest" } },
    });
    expect(metadata.error?.code).toBe(-32602);
    expect(receiver.received.length).toBe(before);
  });

  it("delivers every stored update in order, with the token header and a JWT the JWKS verifies (1.0)", async () => {
    const client = await peergate.client(alice.secret);
    const task = asTask(
      await client.sendMessage({
        tenant: "",
        message: userMessage("scenario:answer push me"),
        configuration: {
          acceptedOutputModes: [],
          taskPushNotificationConfig: pushConfig(receiver.url, {
            token: "receiver-token",
            authentication: { scheme: "Bearer", credentials: "" },
          }),
          historyLength: undefined,
          returnImmediately: false,
        } as never,
        metadata: undefined,
      }),
    );
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const pushes = await deliveriesOf(receiver, task.id);
    expect(pushes.length).toBeGreaterThanOrEqual(2);
    expect(readPushedTask(nth(pushes, -1)).state).toBe("TASK_STATE_COMPLETED");
    // Only the last is terminal, and the delivery ids grow: stored order.
    expect(pushes.filter(isTerminalPush)).toHaveLength(1);
    const ids = pushes.map((p) => Number(p.headers["x-a2a-notification-id"]));
    expect([...ids].sort((x, y) => x - y)).toEqual(ids);

    const jwks = createRemoteJWKSet(new URL(`${peergate.url}/.well-known/jwks.json`));
    for (const push of pushes) {
      expect(push.headers["content-type"]).toBe("application/a2a+json");
      expect(push.headers["x-a2a-notification-token"]).toBe("receiver-token");
      const token = String(push.headers.authorization).replace(/^Bearer /, "");
      const { payload, protectedHeader } = await jwtVerify(token, jwks, {
        issuer: peergate.url,
        audience: receiver.url,
      });
      expect(protectedHeader.jku).toBe(`${peergate.url}/.well-known/jwks.json`);
      expect(payload.taskId).toBe(task.id);
      expect(payload.request_body_sha256).toBe(
        createHash("sha256").update(push.body).digest("hex"),
      );
    }
  });

  it("retries a delivery the receiver failed twice, keeping the order", async () => {
    receiver.failNext(2);
    const reply = await rawRpc(peergate, alice.secret, "SendMessage", {
      message: {
        messageId: crypto.randomUUID(),
        role: "ROLE_USER",
        parts: [{ text: "scenario:answer retry" }],
      },
      configuration: { taskPushNotificationConfig: { url: receiver.url, token: "raw" } },
    });
    const taskId = reply.result.task.id as string;
    const pushes = await deliveriesOf(receiver, taskId);
    const failed = pushes.filter((p) => p.answered === 500);
    expect(failed).toHaveLength(2);
    // Both failures were the first delivery, attempted again until it went through.
    const firstId = nth(failed, 0).headers["x-a2a-notification-id"];
    expect(nth(failed, 1).headers["x-a2a-notification-id"]).toBe(firstId);
    const ok = pushes.filter((p) => p.answered === 200);
    expect(nth(ok, 0).headers["x-a2a-notification-id"]).toBe(firstId);
    const okIds = ok.map((p) => Number(p.headers["x-a2a-notification-id"]));
    expect(new Set(okIds).size).toBe(okIds.length);
    expect([...okIds].sort((x, y) => x - y)).toEqual(okIds);
    expect(readPushedTask(nth(ok, -1)).state).toBe("TASK_STATE_COMPLETED");

    // Recorded in the audit trail (one event per batch of outcomes, listing each delivery).
    const audit = await peergate.admin("GET", "/audit?kind=push.delivered&limit=1000");
    const logged = (audit.body?.events ?? []).flatMap(
      (e: { data: { deliveries: { taskId: string; attempts: number }[] } }) => e.data.deliveries,
    );
    expect(logged.find((d: { taskId: string }) => d.taskId === taskId)?.attempts).toBe(3);
  });

  it("delivers v0.3 Task bodies to a config set with the v0.3 client", async () => {
    const client = await legacyClient(peergate, bob.secret);
    const task = asTask(
      await client.sendMessage({
        tenant: "",
        message: userMessage("scenario:answer legacy"),
        configuration: {
          acceptedOutputModes: [],
          taskPushNotificationConfig: pushConfig(receiver.url, { token: "legacy-token" }),
          historyLength: undefined,
          returnImmediately: false,
        } as never,
        metadata: undefined,
      }),
    ) as Task;
    const pushes = await deliveriesOf(receiver, task.id);
    const last = nth(pushes, -1);
    expect(last.json).toMatchObject({ kind: "task", id: task.id, status: { state: "completed" } });
    expect(last.headers["x-a2a-notification-token"]).toBe("legacy-token");

    const listed = await rawRpc(
      peergate,
      bob.secret,
      "tasks/pushNotificationConfig/list",
      { id: task.id },
      "",
    );
    expect(listed.result).toHaveLength(1);
    expect(listed.result[0].pushNotificationConfig.url).toBe(receiver.url);
  });
});
