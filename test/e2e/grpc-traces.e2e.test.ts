// Traces over the A2A gRPC binding, through the real server in this process: a SendMessage over
// gRPC is one trace, continued from the `traceparent` metadata the client sent, whose server span
// (RPC conventions) holds the run's spans — as an HTTP request's does (test/process/traces.test.ts
// proves the HTTP bindings from a child process, with the OTLP exporter).
import { randomBytes } from "node:crypto";
import { TaskState } from "@a2a-js/sdk";
import { type CallInterceptor, ClientFactory } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { context, SpanKind, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, expect, it } from "vitest";
import { setTracing } from "../../src/trace.ts";
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

const exporter = new InMemorySpanExporter();
let model: ScriptedModel;
let peergate: Peergate;
let secret: string;

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
  );
  setTracing(true);
  model = await startScriptedModel({ answer: [{ text: "All done." }] });
  peergate = await startPeergate({
    ...createSharedSecrets(),
    policiesDir: await copyPolicies(),
    workspace: await createWorkspace(),
    modelBaseUrl: model.baseUrl,
    env: { PEERGATE_GRPC_PORT: "0" },
  });
  secret = (await addCaller(peergate, { name: "traced", kind: "peer" })).secret;
}, 180_000);

afterAll(async () => {
  await peergate?.stop();
  await model?.close();
  await removeTempDirs();
  setTracing(false);
  trace.disable();
  context.disable();
});

it("a SendMessage over gRPC is one trace from the caller's traceparent, its run inside the server span", async () => {
  const traceId = randomBytes(16).toString("hex");
  const parentId = randomBytes(8).toString("hex");
  const metadata: CallInterceptor = {
    async before(args) {
      if (!args.options?.serviceParameters) return;
      args.options.serviceParameters.authorization = `Bearer ${secret}`;
      args.options.serviceParameters.traceparent = `00-${traceId}-${parentId}-01`;
    },
    async after() {},
  };
  const client = await new ClientFactory({
    transports: [new GrpcTransportFactory()],
    clientConfig: { interceptors: [metadata] },
  }).createFromUrl(peergate.url);
  const task = asTask(
    await client.sendMessage({
      tenant: "",
      message: userMessage("scenario:answer traced over grpc"),
      configuration: undefined,
      metadata: undefined,
    }),
  );
  expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);

  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  const server = spans.find((s) => s.name === "lf.a2a.v1.A2AService/SendMessage");
  expect(server, spans.map((s) => s.name).join(", ")).toBeDefined();
  expect(server?.kind).toBe(SpanKind.SERVER);
  expect(server?.parentSpanContext?.spanId).toBe(parentId);
  expect(server?.attributes).toMatchObject({
    "rpc.system": "grpc",
    "rpc.service": "lf.a2a.v1.A2AService",
    "rpc.method": "SendMessage",
  });
  // The run's spans are in the same trace, under the server span.
  const names = spans.map((s) => s.name);
  expect(names).toEqual(expect.arrayContaining(["peergate.run.admit", "peergate.run"]));
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  const admit = spans.find((s) => s.name === "peergate.run.admit");
  let up = admit;
  while (up && up !== server) up = byId.get(up.parentSpanContext?.spanId ?? "");
  expect(up, "peergate.run.admit is under the server span").toBe(server);
  // Nothing of the credential in any span.
  expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain(secret);
});
