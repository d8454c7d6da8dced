// The A2A 1.0 HTTP+JSON binding end to end (issue 25): the real server with a scripted model, and
// the real @a2a-js/sdk client built from the card with its REST transport factory. One bearer
// caller and one JWT caller each complete send, stream, get, list, cancel, subscribe and the four
// push-config methods; another caller gets "not found" for every one of them on their tasks.
// Then attacks from outside: path tricks, encoded ids, oversized bodies, wrong media types, no
// credentials.
import { randomUUID } from "node:crypto";
import { type ListTasksRequest, type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { eventually } from "../support/eventually.ts";
import { type PushReceiver, readPushedTask, startPushReceiver } from "./push-receiver.ts";
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
  textOf,
  userMessage,
} from "./support.ts";

const scenarios = {
  answer: [{ text: "All done over REST." }],
  // A run that stays in flight until it is canceled.
  hang: [{ hang: true }],
};

const issuer = "https://jwt-peer.example";
const audience = "peergate";

function listRequest(overrides: Partial<ListTasksRequest> = {}): ListTasksRequest {
  return {
    tenant: "",
    contextId: "",
    status: TaskState.TASK_STATE_UNSPECIFIED,
    pageToken: "",
    statusTimestampAfter: undefined,
    ...overrides,
  };
}

function pushConfig(taskId: string, url: string, id = "") {
  return { tenant: "", id, taskId, url, token: "tok", authentication: undefined };
}

function stateOf(event: StreamResponse | undefined): TaskState | undefined {
  const payload = event?.payload;
  if (payload?.$case === "task") return payload.value.status?.state;
  if (payload?.$case === "statusUpdate") return payload.value.status?.state;
  return undefined;
}

async function collect(stream: AsyncGenerator<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** The ErrorInfo reason of a failed client call. */
async function reasonOf(pending: Promise<unknown>): Promise<string> {
  const error = (await pending.then(
    () => undefined,
    (e: unknown) => e,
  )) as { reason?: string } | undefined;
  return error?.reason ?? "(the call succeeded)";
}

/** An a2a-js client on the HTTP+JSON transport, each request carrying `authorization()`. */
function restClient(url: string, authorization: () => Promise<string>): Promise<Client> {
  const fetchImpl: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("Authorization", await authorization());
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new RestTransportFactory({ fetchImpl })],
      preferredTransports: ["HTTP+JSON"],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(url);
}

describe("the A2A HTTP+JSON binding", () => {
  let model: ScriptedModel;
  let peergate: Peergate;
  let receiver: PushReceiver;
  let bearer: { secret: string };
  let other: { secret: string };
  let jwtKey: Awaited<ReturnType<typeof generateKeyPair>>;
  const callers: Record<string, Client> = {};

  const signJwt = async () => {
    const now = Math.floor(Date.now() / 1000);
    return `Bearer ${await new SignJWT({})
      .setProtectedHeader({ alg: "ES256", typ: "JWT" })
      .setIssuer(issuer)
      .setAudience(audience)
      .setIssuedAt(now - 5)
      .setExpirationTime(now + 120)
      .setJti(randomUUID())
      .sign(jwtKey.privateKey)}`;
  };

  async function grantPush(name: string) {
    const operatorToken = await createOperatorToken({
      services: peergate.server.services,
      actor: "system",
    });
    const set = await peergate.admin(
      "PUT",
      `/callers/${name}/push-hosts`,
      { hosts: [receiver.origin] },
      { "x-peergate-operator-token": operatorToken },
    );
    expect(set.status).toBe(200);
  }

  beforeAll(async () => {
    receiver = await startPushReceiver();
    model = await startScriptedModel(scenarios);
    peergate = await startPeergate({
      ...createSharedSecrets(),
      policiesDir: await copyPolicies(),
      workspace: await createWorkspace(),
      modelBaseUrl: model.baseUrl,
      env: { PEERGATE_PUSH_ALLOW_ADDRESSES: "127.0.0.1", PEERGATE_PUSH_RETRY_MS: "50" },
      // The attacks below fail authentication dozens of times from one address; the throttle
      // that turns those into 429s is the one /a2a has, proven in test/security.
      server: { authThrottle: { maxFailures: 1000, windowMs: 60_000 } },
    });
    jwtKey = await generateKeyPair("ES256", { extractable: true });
    bearer = await addCaller(peergate, { name: "rest-bearer", kind: "peer", tier: "public" });
    await addCaller(peergate, {
      name: "rest-jwt",
      kind: "peer",
      tier: "public",
      jwt: {
        issuer,
        audience,
        algorithms: ["ES256"],
        jwk: await exportJWK(jwtKey.publicKey),
        maxAgeSeconds: 300,
      },
    });
    other = await addCaller(peergate, { name: "rest-other", kind: "peer", tier: "public" });
    await grantPush("rest-bearer");
    await grantPush("rest-jwt");
    await grantPush("rest-other");
    callers.bearer = await restClient(peergate.url, async () => `Bearer ${bearer.secret}`);
    callers.jwt = await restClient(peergate.url, signJwt);
    callers.other = await restClient(peergate.url, async () => `Bearer ${other.secret}`);
  }, 180_000);

  afterAll(async () => {
    await peergate?.stop();
    await Promise.allSettled([model?.close(), receiver?.close()]);
    await removeTempDirs();
  });

  it("is listed on the card, and is what the client picked", async () => {
    const card: any = await (
      await fetch(`${peergate.url}/.well-known/agent-card.json`, {
        headers: { "A2A-Version": "1.0" },
      })
    ).json();
    expect(card.supportedInterfaces).toContainEqual({
      url: peergate.url,
      protocolBinding: "HTTP+JSON",
      protocolVersion: "1.0",
    });
    const transport = (callers.bearer as unknown as { transport: { protocolName: string } })
      .transport;
    expect(transport.protocolName).toBe("HTTP+JSON");
  });

  for (const who of ["bearer", "jwt"] as const) {
    describe(`as the ${who} caller`, () => {
      const client = () => callers[who] as Client;
      /** Tasks this caller made, for the other caller to try. */
      const made: { done?: Task; running?: Task } = {};

      it("sends, streams, gets and lists", async () => {
        const task = asTask(
          await client().sendMessage({
            message: userMessage(`scenario:answer send ${who}`),
          } as never),
        );
        expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(textOf(task.artifacts[0]?.parts)).toBe("All done over REST.");
        made.done = task;

        const events = await collect(
          client().sendMessageStream({
            message: userMessage(`scenario:answer stream ${who}`),
          } as never),
        );
        expect(events[0]?.payload?.$case).toBe("task");
        expect(stateOf(events.at(-1))).toBe(TaskState.TASK_STATE_COMPLETED);

        const got = await client().getTask({ id: task.id, historyLength: 1 } as never);
        expect(got.id).toBe(task.id);
        expect(got.history).toHaveLength(1);

        const listed = await client().listTasks(listRequest({ pageSize: 100 }));
        expect(listed.tasks.map((t) => t.id)).toContain(task.id);
      });

      it("subscribes to a running task and cancels it; the subscription ends canceled", async () => {
        const stream = client().sendMessageStream({
          message: userMessage(`scenario:hang ${who}`),
        } as never);
        const first = await stream.next();
        const running =
          first.value?.payload?.$case === "task" ? first.value.payload.value : undefined;
        expect(running).toBeDefined();
        made.running = running;
        const id = running?.id ?? "";
        const subscription = client().resubscribeTask({ id } as never);
        expect((await subscription.next()).value?.payload?.$case).toBe("task");

        const canceled = await client().cancelTask({ id } as never);
        expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
        expect(stateOf((await collect(subscription)).at(-1))).toBe(TaskState.TASK_STATE_CANCELED);
        expect(stateOf((await collect(stream)).at(-1))).toBe(TaskState.TASK_STATE_CANCELED);
      });

      it("creates, gets, lists and deletes push configs, and the receiver hears the task", async () => {
        const task = asTask(
          await client().sendMessage({
            message: userMessage(`scenario:answer push ${who}`),
          } as never),
        );
        const created = await client().createTaskPushNotificationConfig(
          pushConfig(task.id, receiver.url, `cfg-${who}`),
        );
        expect(created).toMatchObject({ id: `cfg-${who}`, taskId: task.id, url: receiver.url });
        const got = await client().getTaskPushNotificationConfig({
          tenant: "",
          taskId: task.id,
          id: `cfg-${who}`,
        });
        expect(got).toMatchObject({ id: `cfg-${who}`, url: receiver.url, token: "tok" });
        const listed = await client().listTaskPushNotificationConfig({
          tenant: "",
          taskId: task.id,
          pageSize: 0,
          pageToken: "",
        });
        expect(listed.configs.map((c) => c.id)).toEqual([`cfg-${who}`]);

        // A config on a running task is delivered when the task moves.
        const stream = client().sendMessageStream({
          message: userMessage(`scenario:hang push ${who}`),
        } as never);
        const first = await stream.next();
        const runningId =
          first.value?.payload?.$case === "task" ? first.value.payload.value.id : "";
        await client().createTaskPushNotificationConfig(pushConfig(runningId, receiver.url));
        await client().cancelTask({ id: runningId } as never);
        await collect(stream);
        const pushed = await eventually("the canceled task's push", () =>
          receiver.received.find(
            (p) =>
              readPushedTask(p).id === runningId &&
              readPushedTask(p).state === "TASK_STATE_CANCELED",
          ),
        );
        expect(pushed.headers["content-type"]).toBe("application/a2a+json");

        await client().deleteTaskPushNotificationConfig({
          tenant: "",
          taskId: task.id,
          id: `cfg-${who}`,
        });
        const after = await client().listTaskPushNotificationConfig({
          tenant: "",
          taskId: task.id,
          pageSize: 0,
          pageToken: "",
        });
        expect(after.configs).toEqual([]);
        await client().createTaskPushNotificationConfig(
          pushConfig(task.id, receiver.url, `keep-${who}`),
        );
      });

      it("is a stranger to another caller: every operation on its tasks is not found", async () => {
        const stranger = callers.other as Client;
        const ids = [made.done?.id ?? "", made.running?.id ?? ""];
        for (const id of ids) {
          expect(await reasonOf(stranger.getTask({ id } as never))).toBe("TASK_NOT_FOUND");
          expect(await reasonOf(stranger.cancelTask({ id } as never))).toBe("TASK_NOT_FOUND");
          expect(await reasonOf(collect(stranger.resubscribeTask({ id } as never)))).toBe(
            "TASK_NOT_FOUND",
          );
          expect(
            await reasonOf(
              stranger.sendMessage({
                message: { ...userMessage("scenario:answer hijack"), taskId: id },
              } as never),
            ),
          ).toBe("TASK_NOT_FOUND");
          expect(
            await reasonOf(stranger.createTaskPushNotificationConfig(pushConfig(id, receiver.url))),
          ).toBe("TASK_NOT_FOUND");
          expect(
            await reasonOf(
              stranger.listTaskPushNotificationConfig({
                tenant: "",
                taskId: id,
                pageSize: 0,
                pageToken: "",
              }),
            ),
          ).toBe("TASK_NOT_FOUND");
          for (const configId of [`keep-${who}`, "anything"]) {
            expect(
              await reasonOf(
                stranger.getTaskPushNotificationConfig({ tenant: "", taskId: id, id: configId }),
              ),
            ).toBe("TASK_NOT_FOUND");
            expect(
              await reasonOf(
                stranger.deleteTaskPushNotificationConfig({ tenant: "", taskId: id, id: configId }),
              ),
            ).toBe("TASK_NOT_FOUND");
          }
        }
        const theirs = await stranger.listTasks(listRequest({ pageSize: 100 }));
        expect(theirs.tasks.some((t) => ids.includes(t.id))).toBe(false);
        // Nothing the stranger did touched the owner's task or its configs.
        const owned = await client().getTask({ id: made.done?.id ?? "" } as never);
        expect(owned.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      });
    });
  }

  describe("attacked from outside", () => {
    const raw = (
      path: string,
      init: { method?: string; headers?: Record<string, string>; body?: string } = {},
      /** null: no Authorization at all. */
      secret: string | null = bearer.secret,
    ) =>
      fetch(`${peergate.url}${path}`, {
        method: init.method ?? "GET",
        headers: {
          "A2A-Version": "1.0",
          ...(secret ? { Authorization: `Bearer ${secret}` } : {}),
          ...init.headers,
        },
        ...(init.body === undefined ? {} : { body: init.body }),
      });

    it("answers no credentials, a bad token and a forged JWT with the one 401, before reading anything", async () => {
      const paths: [string, string][] = [
        ["POST", "/message:send"],
        ["POST", "/message:stream"],
        ["GET", "/tasks"],
        ["GET", `/tasks/${randomUUID()}`],
        ["POST", `/tasks/${randomUUID()}:cancel`],
        ["GET", `/tasks/${randomUUID()}:subscribe`],
        ["POST", `/tasks/${randomUUID()}/pushNotificationConfigs`],
        ["DELETE", `/tasks/${randomUUID()}/pushNotificationConfigs/x`],
        ["GET", "/extendedAgentCard"],
      ];
      // A JWT with the registered issuer and audience, signed by a key no caller has.
      const forgedKey = await generateKeyPair("ES256");
      const now = Math.floor(Date.now() / 1000);
      const forged = await new SignJWT({})
        .setProtectedHeader({ alg: "ES256", typ: "JWT" })
        .setIssuer(issuer)
        .setAudience(audience)
        .setIssuedAt(now)
        .setExpirationTime(now + 60)
        .setJti(randomUUID())
        .sign(forgedKey.privateKey);
      for (const [method, path] of paths) {
        for (const secret of [null, "pg_not-a-token", forged]) {
          const res = await raw(
            path,
            { method, body: method === "POST" ? "{" : undefined },
            secret,
          );
          expect(res.status, `${method} ${path}`).toBe(401);
          expect(res.headers.get("www-authenticate")).toBe('Bearer realm="peergate"');
          expect(((await res.json()) as any).detail).toBe("missing or invalid credentials");
        }
      }
    });

    it("keeps another caller's id, encoded ids and dot segments inside the caller's own tasks", async () => {
      const mine = asTask(
        await (callers.bearer as Client).sendMessage({
          message: userMessage("scenario:answer tricks"),
        } as never),
      );
      const cases: [string, string, number][] = [
        // Another caller's task, by id and percent-encoded.
        ["another caller's id", `/tasks/${mine.id}`, 404],
        [
          "another caller's id, every byte encoded",
          `/tasks/${[...mine.id].map((ch) => `%${ch.charCodeAt(0).toString(16)}`).join("")}`,
          404,
        ],
        ["an encoded slash in the id", `/tasks/..%2Fadmin%2Fv1%2Fcallers`, 404],
        ["an encoded colon is part of the id", `/tasks/${mine.id}%3Acancel`, 404],
        ["an unknown action", `/tasks/${mine.id}:explode`, 404],
        ["broken percent-encoding", "/tasks/%E0%A4%A", 400],
      ];
      for (const [name, path, status] of cases) {
        const res = await raw(path, {}, other.secret);
        expect(res.status, name).toBe(status);
        const text = await res.text();
        expect(text, name).not.toContain("tricks");
      }
      // `/tasks/../admin/v1/callers` is resolved by the URL parser before routing: it reaches
      // the admin API, which does not take a peer's token.
      const dotted = await fetch(`${peergate.url}/tasks/../admin/v1/callers`, {
        headers: { Authorization: `Bearer ${other.secret}` },
      });
      expect(dotted.status).toBe(401);
      // The owner's task is untouched and still its own.
      const still = await (callers.bearer as Client).getTask({ id: mine.id } as never);
      expect(still.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    });

    it("refuses an oversized body, a wrong media type, a browser Origin and a token in the query", async () => {
      const big = await raw("/message:send", {
        method: "POST",
        headers: { "Content-Type": "application/a2a+json" },
        body: JSON.stringify({ message: { text: "x".repeat(2 * 1024 * 1024) } }),
      });
      expect(big.status).toBe(413);
      const form = await raw("/message:send", {
        method: "POST",
        headers: { "Content-Type": "text/plain" },
        body: "{}",
      });
      expect(form.status).toBe(400);
      expect(((await form.json()) as any).error.details[0].reason).toBe(
        "CONTENT_TYPE_NOT_SUPPORTED",
      );
      const browser = await raw("/tasks", { headers: { Origin: "https://evil.example" } });
      expect(browser.status).toBe(403);
      const query = await raw(`/tasks?access_token=${bearer.secret}`, {}, null);
      expect(query.status).toBe(400);
      // pageToken is ListTasks' cursor, not a credential.
      const cursor = await raw("/tasks?pageToken=&pageSize=1");
      expect(cursor.status).toBe(200);
    });
  });
});
