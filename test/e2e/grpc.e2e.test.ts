// The A2A gRPC binding through the real server (PEERGATE_GRPC_PORT): the a2a-js 1.3 client, built
// from the card with its GrpcTransportFactory alone, completes send, stream, get, list, cancel,
// subscribe and the four push-config methods as a bearer caller and as a JWT caller; another
// caller's task is NOT_FOUND on every method; a call without credentials, or with wrong ones, is
// UNAUTHENTICATED with nothing of the request done, and audited like a refusal on POST /a2a; a
// message over the body limit is refused; a caller past its concurrency limit is
// RESOURCE_EXHAUSTED, and revoking it ends its open stream; a call without `a2a-version` (0.3) is
// FAILED_PRECONDITION; without the variable no gRPC port is opened, and a stop closes it.
import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import { type AgentCard, type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import { type CallInterceptor, type Client, ClientFactory } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { GRPC_STATUS_CODE } from "@a2a-js/sdk/errors/grpc";
import { A2AService } from "@a2a-js/sdk/server/grpc";
import { credentials, Metadata, makeGenericClientConstructor } from "@grpc/grpc-js";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usageExtensionUri } from "../../src/a2a/usage-extension.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { type PushReceiver, startPushReceiver } from "./push-receiver.ts";
import {
  addCaller,
  asTask,
  collectStream,
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
  answer: [{ text: "All done." }],
  hang: [{ text: "thinking", hang: true }],
};

const issuer = "https://grpc-peer.example";
const audience = "peergate";

function stateOf(event: StreamResponse | undefined): TaskState | undefined {
  const payload = event?.payload;
  if (payload?.$case === "task") return payload.value.status?.state;
  if (payload?.$case === "statusUpdate") return payload.value.status?.state;
  return undefined;
}

function pushConfig(url: string, extra: Record<string, unknown> = {}) {
  return { tenant: "", id: "", taskId: "", url, token: "", authentication: undefined, ...extra };
}

/** The gRPC status of a call that must fail (the SDK's errors carry it as `status`). */
async function statusOf(call: Promise<unknown> | AsyncGenerator<unknown>): Promise<number> {
  try {
    if (Symbol.asyncIterator in call) {
      for await (const _ of call) {
        // drained: a refusal arrives as the stream's error
      }
    } else {
      await call;
    }
  } catch (error) {
    return (error as { status?: number }).status ?? -1;
  }
  throw new Error("the call succeeded");
}

/** The a2a-js client from the card, over gRPC only, sending `credential()` on every call. */
async function grpcClient(
  peergate: Peergate,
  credential: () => Promise<string | undefined>,
  /** More metadata on every call (`a2a-extensions`, `last-event-id`). */
  more: () => Record<string, string> = () => ({}),
): Promise<Client> {
  const authorize: CallInterceptor = {
    async before(args) {
      const value = await credential();
      if (value !== undefined && args.options?.serviceParameters) {
        args.options.serviceParameters.authorization = value;
        Object.assign(args.options.serviceParameters, more());
      }
    },
    async after() {},
  };
  // Not merged with the SDK's defaults, which would add JSON-RPC (listed first on the card).
  const factory = new ClientFactory({
    transports: [new GrpcTransportFactory()],
    clientConfig: { interceptors: [authorize] },
  });
  const client = await factory.createFromUrl(peergate.url);
  expect(readProtocolName(client)).toBe("GRPC");
  return client;
}

/** The binding a client speaks (the SDK keeps its transport on the client). */
function readProtocolName(client: Client): string | undefined {
  return (client as unknown as { transport?: { protocolName?: string } }).transport?.protocolName;
}

let model: ScriptedModel;
let receiver: PushReceiver;
let peergate: Peergate;
let signJwt: () => Promise<string>;
const secrets: Record<string, string> = {};

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
  model = await startScriptedModel(scenarios);
  receiver = await startPushReceiver();
  peergate = await startPeergate({
    ...createSharedSecrets(),
    policiesDir: await copyPolicies(),
    workspace: await createWorkspace(),
    modelBaseUrl: model.baseUrl,
    env: {
      PEERGATE_GRPC_PORT: "0",
      PEERGATE_PUSH_ALLOW_ADDRESSES: "127.0.0.1",
      PEERGATE_PUSH_RETRY_MS: "50",
    },
  });
  const key = await generateKeyPair("ES256", { extractable: true });
  secrets.alice = (await addCaller(peergate, { name: "alice", kind: "peer" })).secret;
  secrets.bob = (await addCaller(peergate, { name: "bob", kind: "peer" })).secret;
  await addCaller(peergate, {
    name: "jwt-peer",
    kind: "peer",
    jwt: {
      issuer,
      audience,
      algorithms: ["ES256"],
      jwk: await exportJWK(key.publicKey),
      maxAgeSeconds: 300,
    },
  });
  // A fresh JWT for every call: each jti is accepted once.
  signJwt = () =>
    new SignJWT({})
      .setProtectedHeader({ alg: "ES256", typ: "JWT" })
      .setIssuer(issuer)
      .setAudience(audience)
      .setIssuedAt()
      .setExpirationTime("2m")
      .setJti(randomUUID())
      .sign(key.privateKey);
  await grantPush("alice");
  await grantPush("jwt-peer");
}, 180_000);

afterAll(async () => {
  await peergate?.stop();
  await Promise.allSettled([model?.close(), receiver?.close()]);
  await removeTempDirs();
});

describe("the agent card", () => {
  it("lists the gRPC binding, A2A 1.0, at the address bound", async () => {
    const card = (await (
      await fetch(`${peergate.url}/.well-known/agent-card.json`, {
        headers: { "A2A-Version": "1.0" },
      })
    ).json()) as { supportedInterfaces: { url: string; protocolBinding: string }[] };
    expect(peergate.server.grpcAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(card.supportedInterfaces).toContainEqual({
      url: peergate.server.grpcAddress,
      protocolBinding: "GRPC",
      protocolVersion: "1.0",
    });
    // The 0.3 card has no gRPC (only the 1.0 service is served).
    const v03 = await (await fetch(`${peergate.url}/.well-known/agent-card.json`)).json();
    expect(JSON.stringify(v03)).not.toContain("GRPC");
  });
});

for (const who of ["bearer", "jwt"] as const) {
  describe(`the a2a-js gRPC client as a ${who} caller`, () => {
    let client: Client;
    let other: Client;
    let sentTask: Task;

    beforeAll(async () => {
      client = await grpcClient(peergate, async () =>
        who === "bearer" ? `Bearer ${secrets.alice}` : `Bearer ${await signJwt()}`,
      );
      other = await grpcClient(peergate, async () => `Bearer ${secrets.bob}`);
      expect(client.protocolVersion).toBe("1.0");
    });

    it("sends a message and gets the completed task with the answer", async () => {
      sentTask = asTask(
        await client.sendMessage({
          tenant: "",
          message: userMessage("scenario:answer hello over grpc"),
          configuration: undefined,
          metadata: undefined,
        }),
      );
      expect(sentTask.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(textOf(sentTask.artifacts[0]?.parts)).toBe("All done.");
    });

    it("streams a message to its completion", async () => {
      const { events, error } = await collectStream(
        client.sendMessageStream({
          tenant: "",
          message: userMessage("scenario:answer stream over grpc"),
          configuration: undefined,
          metadata: undefined,
        }),
      );
      expect(error).toBeUndefined();
      expect(events[0]?.payload?.$case).toBe("task");
      expect(stateOf(events.at(-1))).toBe(TaskState.TASK_STATE_COMPLETED);
      // A stream carries the answer once, in chunks (how many depends on the machine's pace):
      // the updates of the answer artifact, appended, are the answer.
      let answer = "";
      for (const e of events) {
        if (e.payload?.$case !== "artifactUpdate") continue;
        const update = e.payload.value;
        if (update.artifact?.name !== "answer") continue;
        answer = (update.append ? answer : "") + textOf(update.artifact.parts);
      }
      expect(answer).toBe("All done.");
    });

    it("gets and lists its tasks", async () => {
      const got = await client.getTask({ tenant: "", id: sentTask.id, historyLength: undefined });
      expect(got.id).toBe(sentTask.id);
      expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const listed = await client.listTasks({
        tenant: "",
        contextId: "",
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageToken: "",
        statusTimestampAfter: undefined,
      });
      expect(listed.tasks.map((t) => t.id)).toContain(sentTask.id);
      const others = await other.listTasks({
        tenant: "",
        contextId: "",
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageToken: "",
        statusTimestampAfter: undefined,
      });
      expect(others.tasks.map((t) => t.id)).not.toContain(sentTask.id);
    });

    it("subscribes to a running task and cancels it; both streams end canceled", async () => {
      const stream = client.sendMessageStream({
        tenant: "",
        message: userMessage("scenario:hang think for a while"),
        configuration: undefined,
        metadata: undefined,
      });
      const first = await stream.next();
      const task = first.value?.payload?.$case === "task" ? first.value.payload.value : undefined;
      expect(task).toBeDefined();
      const taskId = task?.id ?? "";

      // Another caller can neither watch nor stop it.
      expect(await statusOf(other.resubscribeTask({ tenant: "", id: taskId }))).toBe(
        GRPC_STATUS_CODE.NOT_FOUND,
      );
      expect(
        await statusOf(other.cancelTask({ tenant: "", id: taskId, metadata: undefined })),
      ).toBe(GRPC_STATUS_CODE.NOT_FOUND);

      const subscribed = client.resubscribeTask({ tenant: "", id: taskId });
      const snapshot = await subscribed.next();
      expect(snapshot.value?.payload?.$case).toBe("task");

      const canceled = await client.cancelTask({ tenant: "", id: taskId, metadata: undefined });
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      const rest = await collectStream(subscribed);
      expect(rest.error).toBeUndefined();
      expect(stateOf(rest.events.at(-1))).toBe(TaskState.TASK_STATE_CANCELED);
      const original = await collectStream(stream);
      expect(stateOf(original.events.at(-1))).toBe(TaskState.TASK_STATE_CANCELED);
      const stored = await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
      expect(stored.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    });

    it("creates, gets, lists and deletes push configs", async () => {
      const created = await client.createTaskPushNotificationConfig(
        pushConfig(receiver.url, { taskId: sentTask.id, id: "mine", token: "tok-1" }),
      );
      expect(created).toMatchObject({ id: "mine", taskId: sentTask.id, url: receiver.url });
      const got = await client.getTaskPushNotificationConfig({
        tenant: "",
        taskId: sentTask.id,
        id: "mine",
      });
      expect(got).toMatchObject({ id: "mine", url: receiver.url, token: "tok-1" });
      const listed = await client.listTaskPushNotificationConfig({
        tenant: "",
        taskId: sentTask.id,
        pageSize: 0,
        pageToken: "",
      });
      expect(listed.configs.map((c) => c.id)).toEqual(["mine"]);

      // Another caller finds neither the task nor its configs.
      const scope = { tenant: "", taskId: sentTask.id };
      for (const call of [
        () => other.getTaskPushNotificationConfig({ ...scope, id: "mine" }),
        () => other.listTaskPushNotificationConfig({ ...scope, pageSize: 0, pageToken: "" }),
        () => other.deleteTaskPushNotificationConfig({ ...scope, id: "mine" }),
        () =>
          other.createTaskPushNotificationConfig(pushConfig(receiver.url, { taskId: sentTask.id })),
        () => other.getTask({ ...scope, id: sentTask.id, historyLength: undefined }),
      ]) {
        expect(await statusOf(call())).toBe(GRPC_STATUS_CODE.NOT_FOUND);
      }

      await client.deleteTaskPushNotificationConfig({ ...scope, id: "mine" });
      const after = await client.listTaskPushNotificationConfig({
        ...scope,
        pageSize: 0,
        pageToken: "",
      });
      expect(after.configs).toEqual([]);
    });

    it("a follow-up naming another caller's task is NOT_FOUND, and nothing of it is sent", async () => {
      const message = { ...userMessage("scenario:answer hijack"), taskId: sentTask.id };
      expect(
        await statusOf(
          other.sendMessage({ tenant: "", message, configuration: undefined, metadata: undefined }),
        ),
      ).toBe(GRPC_STATUS_CODE.NOT_FOUND);
      expect(model.requestsOf("answer").some((r) => JSON.stringify(r).includes("hijack"))).toBe(
        false,
      );
    });
  });
}

describe("resuming and usage over gRPC", () => {
  /** The event's id in the task's log (`metadata.peergate.eventId`), wherever the event holds it. */
  const eventIdOf = (event: unknown): number | undefined => {
    const found = /"eventId":(\d+)/.exec(JSON.stringify(event));
    return found ? Number(found[1]) : undefined;
  };

  it("SubscribeToTask with the last-event-id metadata replays what followed, each event once", async () => {
    const client = await grpcClient(peergate, async () => `Bearer ${secrets.alice}`);
    const streamed = await collectStream(
      client.sendMessageStream({
        tenant: "",
        message: userMessage("scenario:answer stream to resume over grpc"),
        configuration: undefined,
        metadata: undefined,
      }),
    );
    expect(streamed.error).toBeUndefined();
    const ids = streamed.events.map(eventIdOf);
    expect(ids.every((id) => id !== undefined)).toBe(true);
    expect(ids.length).toBeGreaterThan(2);
    const taskId =
      streamed.events[0]?.payload?.$case === "task" ? streamed.events[0].payload.value.id : "";
    const resumed = await grpcClient(
      peergate,
      async () => `Bearer ${secrets.alice}`,
      () => ({ "last-event-id": String(ids[0]) }),
    );
    const replay = await collectStream(resumed.resubscribeTask({ tenant: "", id: taskId }));
    expect(replay.error).toBeUndefined();
    expect(replay.events.map(eventIdOf)).toEqual(ids.slice(1));
  });

  it("the a2a-extensions metadata activates the usage extension; the answer names it", async () => {
    const plain = await grpcClient(peergate, async () => `Bearer ${secrets.alice}`);
    const without = asTask(
      await plain.sendMessage({
        tenant: "",
        message: userMessage("scenario:answer no usage over grpc"),
        configuration: undefined,
        metadata: undefined,
      }),
    );
    expect(JSON.stringify(without.metadata ?? {})).not.toContain(usageExtensionUri);
    const withUsage = await grpcClient(
      peergate,
      async () => `Bearer ${secrets.alice}`,
      () => ({ "a2a-extensions": usageExtensionUri }),
    );
    const task = asTask(
      await withUsage.sendMessage({
        tenant: "",
        message: userMessage("scenario:answer usage over grpc"),
        configuration: undefined,
        metadata: undefined,
      }),
    );
    expect(task.metadata?.[usageExtensionUri]).toMatchObject({
      tokens: expect.any(Number),
      steps: expect.any(Number),
      day: expect.anything(),
    });
  });
});

describe("refused callers", () => {
  it("without credentials, or with wrong ones, every call is UNAUTHENTICATED and audited", async () => {
    const before = await countTasks();
    const anonymous = await grpcClient(peergate, async () => undefined);
    const wrong = await grpcClient(peergate, async () => `Bearer pg_${"x".repeat(43)}`);
    const forged = await grpcClient(peergate, async () => "Bearer a.b.c");
    const send = {
      tenant: "",
      message: userMessage("scenario:answer sneak in"),
      configuration: undefined,
      metadata: undefined,
    };
    for (const client of [anonymous, wrong, forged]) {
      expect(await statusOf(client.sendMessage(send))).toBe(GRPC_STATUS_CODE.UNAUTHENTICATED);
      expect(await statusOf(client.sendMessageStream(send))).toBe(GRPC_STATUS_CODE.UNAUTHENTICATED);
      expect(
        await statusOf(client.getTask({ tenant: "", id: "x", historyLength: undefined })),
      ).toBe(GRPC_STATUS_CODE.UNAUTHENTICATED);
    }
    expect(await countTasks()).toBe(before);
    expect(model.requestsOf("answer").some((r) => JSON.stringify(r).includes("sneak in"))).toBe(
      false,
    );

    await peergate.server.services.authFailures?.flushAll();
    const audit = await peergate.admin("GET", "/audit?kind=auth.failed&limit=500");
    const summaries = audit.body.events.filter(
      (e: { data: { source?: string } }) => e.data.source === "127.0.0.1",
    );
    const reasons: Record<string, number> = {};
    for (const e of summaries) {
      for (const [reason, n] of Object.entries(e.data.reasons as Record<string, number>)) {
        reasons[reason] = (reasons[reason] ?? 0) + n;
      }
    }
    expect(reasons).toMatchObject({
      "authorization-missing": 3,
      "unknown-secret": 3,
      "jwt-malformed": 3,
    });
  });

  it("refuses a message over the body limit before any run", async () => {
    const client = await grpcClient(peergate, async () => `Bearer ${secrets.alice}`);
    const big = userMessage(`scenario:answer ${"x".repeat(1024 * 1024)}`);
    expect(
      await statusOf(
        client.sendMessage({
          tenant: "",
          message: big,
          configuration: undefined,
          metadata: undefined,
        }),
      ),
    ).toBe(GRPC_STATUS_CODE.RESOURCE_EXHAUSTED);
  });
});

async function countTasks(): Promise<number> {
  const runs = await peergate.admin("GET", "/runs?limit=500");
  return Array.isArray(runs.body?.runs) ? runs.body.runs.length : -1;
}

describe("without PEERGATE_GRPC_PORT", () => {
  it("opens no gRPC port and the card lists no gRPC interface", async () => {
    const plain = await startPeergate({
      ...createSharedSecrets(),
      policiesDir: await copyPolicies(),
      workspace: await createWorkspace(),
      modelBaseUrl: model.baseUrl,
    });
    try {
      expect(plain.server.grpcAddress).toBeUndefined();
      const card = (await (
        await fetch(`${plain.url}/.well-known/agent-card.json`, {
          headers: { "A2A-Version": "1.0" },
        })
      ).json()) as AgentCard;
      expect(card.supportedInterfaces.map((i) => i.protocolBinding)).toEqual([
        "JSONRPC",
        "JSONRPC",
        "HTTP+JSON",
      ]);
    } finally {
      await plain.stop();
    }
  }, 180_000);
});

describe("limits and revocation", () => {
  it("a caller past its concurrency limit is RESOURCE_EXHAUSTED; revoking it ends its stream and refuses it", async () => {
    const carol = await addCaller(peergate, {
      name: "carol",
      kind: "peer",
      budgets: { concurrentRuns: 1 },
    });
    const client = await grpcClient(peergate, async () => `Bearer ${carol.secret}`);
    const send = (text: string) => ({
      tenant: "",
      message: userMessage(text),
      configuration: undefined,
      metadata: undefined,
    });
    const stream = client.sendMessageStream(send("scenario:hang hold the slot"));
    const first = await stream.next();
    expect(first.value?.payload?.$case).toBe("task");
    expect(await statusOf(client.sendMessage(send("scenario:answer one more")))).toBe(
      GRPC_STATUS_CODE.RESOURCE_EXHAUSTED,
    );

    const revoked = await peergate.admin("POST", "/callers/carol/revoke", {});
    expect(revoked.status).toBe(200);
    const rest = await collectStream(stream);
    expect(rest.error).toBeUndefined();
    expect(await statusOf(client.getTask({ tenant: "", id: "x", historyLength: undefined }))).toBe(
      GRPC_STATUS_CODE.UNAUTHENTICATED,
    );
  });
});

describe("a raw gRPC client", () => {
  const Raw = makeGenericClientConstructor(A2AService, "A2AService");
  const call = (metadata: Metadata) =>
    new Promise<number>((resolve) => {
      const raw = new Raw(peergate.server.grpcAddress ?? "", credentials.createInsecure());
      const getTask = raw.getTask as (
        request: unknown,
        metadata: Metadata,
        callback: (error: { code?: number } | null) => void,
      ) => void;
      getTask.call(raw, { tenant: "", id: "x" }, metadata, (error) => {
        raw.close();
        resolve(error?.code ?? 0);
      });
    });
  const metadataOf = (entries: [string, string][]) => {
    const metadata = new Metadata();
    for (const [key, value] of entries) metadata.add(key, value);
    return metadata;
  };

  it("without a2a-version (which means 0.3) is FAILED_PRECONDITION; with 1.0 the task is NOT_FOUND", async () => {
    const auth: [string, string] = ["authorization", `Bearer ${secrets.alice}`];
    expect(await call(metadataOf([auth]))).toBe(GRPC_STATUS_CODE.FAILED_PRECONDITION);
    expect(await call(metadataOf([auth, ["a2a-version", "1.0"]]))).toBe(GRPC_STATUS_CODE.NOT_FOUND);
  });
});

describe("stopping", () => {
  it("closes the gRPC port with the server", async () => {
    const [host, port] = (peergate.server.grpcAddress ?? "").split(":");
    await peergate.stop();
    const refused = await new Promise<string>((resolve) => {
      const socket = connect({ host: host ?? "", port: Number(port) });
      socket.once("connect", () => {
        socket.destroy();
        resolve("connected");
      });
      socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });
});
