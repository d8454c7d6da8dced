// The gRPC binding's error model and its port, on the A2A harness (the real service over a fake
// run engine): a caller past its limits is RESOURCE_EXHAUSTED with no task stored; a failure the
// protocol has no word for is INTERNAL "Internal error", its detail never sent; the database gone
// is UNAVAILABLE; the port answers UNAVAILABLE until its service is in, and a drain ends what is
// still open. Through the real server: test/e2e/grpc.e2e.test.ts.
import { AgentCard, type StreamResponse, TaskState } from "@a2a-js/sdk";
import { type Client, ClientFactory } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { GRPC_STATUS_CODE } from "@a2a-js/sdk/errors/grpc";
import { A2AService } from "@a2a-js/sdk/server/grpc";
import { credentials, Metadata, makeGenericClientConstructor } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createGrpcListener, type GrpcListener } from "../../src/a2a/grpc-listener.ts";
import { type GrpcAuthenticate, readPeerAddress } from "../../src/a2a/grpc-service.ts";
import { UnauthenticatedError, UnavailableError } from "../../src/errors.ts";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, startHarness, userMessage } from "./support.ts";

// Opening and migrating the suite's database is slow on a loaded machine; nothing here is timed.
vi.setConfig({ hookTimeout: 240_000 });

async function statusOf(
  call: Promise<unknown> | AsyncGenerator<unknown>,
): Promise<{ status: number; message: string }> {
  try {
    if (Symbol.asyncIterator in call) {
      for await (const _ of call) {
        // a refusal arrives as the stream's error
      }
    } else {
      await call;
    }
  } catch (error) {
    const e = error as { status?: number; message?: string };
    return { status: e.status ?? -1, message: e.message ?? "" };
  }
  throw new Error("the call succeeded");
}

const listAll = {
  tenant: "",
  contextId: "",
  status: TaskState.TASK_STATE_UNSPECIFIED,
  pageToken: "",
  statusTimestampAfter: undefined,
};

const send = (text: string) => ({
  tenant: "",
  message: userMessage(text),
  configuration: undefined,
  metadata: undefined,
});

describe("readPeerAddress", () => {
  it.each([
    ["127.0.0.1:51234", "127.0.0.1"],
    ["::1:51234", "::1"],
    ["[::1]:51234", "::1"],
    ["::ffff:10.0.0.2:443", "::ffff:10.0.0.2"],
    ["unknown", "unknown"],
    ["/run/peergate.sock", "unknown"],
  ])("%s is %s", (peer, address) => {
    expect(readPeerAddress(peer)).toBe(address);
  });
});

describeEachDatabase(
  "the A2A gRPC binding's errors",
  (ctx) => {
    let h: Harness;
    let listener: GrpcListener;
    let address: string;
    /** What the fake authentication does with a token: a caller, or one of the errors below. */
    const authenticate: GrpcAuthenticate = async (authorization) => {
      const name = /^Bearer test-(.+)$/.exec(authorization ?? "")?.[1] ?? "";
      if (name === "db-gone") throw new UnavailableError("the database is unavailable");
      if (name === "buggy") throw new Error("lookup failed: secret-internal-detail");
      const caller = h.callers.get(name);
      if (!caller) throw new UnauthenticatedError("not a test caller");
      return caller;
    };

    const clientAs = async (name: string): Promise<Client> => {
      const factory = new ClientFactory({
        transports: [new GrpcTransportFactory()],
        clientConfig: {
          interceptors: [
            {
              async before(args) {
                if (args.options?.serviceParameters) {
                  args.options.serviceParameters.authorization = `Bearer test-${name}`;
                }
              },
              async after() {},
            },
          ],
        },
      });
      // The card the service serves, which lists the gRPC port.
      const card = AgentCard.fromJSON(JSON.parse((await h.a2a.agentCard("1.0")).body));
      return factory.createFromAgentCard(card);
    };

    beforeAll(async () => {
      listener = createGrpcListener({ host: "127.0.0.1", port: 0, maxMessageBytes: 1024 * 1024 });
      address = (await listener.listen()).address;
      h = await startHarness(ctx.database, ["alice", "erin"], { grpcAddress: address });
    });
    afterAll(async () => {
      await listener?.close();
      await h?.close();
    });

    it("answers UNAVAILABLE until its service is in", async () => {
      const Raw = makeGenericClientConstructor(A2AService, "A2AService");
      const raw = new Raw(address, credentials.createInsecure());
      const code = await new Promise<number>((resolve) => {
        const getTask = raw.getTask as (
          request: unknown,
          metadata: Metadata,
          callback: (error: { code?: number } | null) => void,
        ) => void;
        getTask.call(raw, { tenant: "", id: "x" }, new Metadata(), (error) =>
          resolve(error?.code ?? 0),
        );
      });
      raw.close();
      expect(code).toBe(GRPC_STATUS_CODE.UNAVAILABLE);
      // Served from here on.
      listener.serve(h.a2a.grpcService(authenticate));
    });

    it("a caller past its limits is RESOURCE_EXHAUSTED, and no task is stored", async () => {
      const erin = await clientAs("erin");
      const before = (await erin.listTasks(listAll)).totalSize;
      const refused = await statusOf(erin.sendMessage(send("limit me")));
      expect(refused.status).toBe(GRPC_STATUS_CODE.RESOURCE_EXHAUSTED);
      expect(refused.message).toContain("retry after 7 s");
      expect((await statusOf(erin.sendMessageStream(send("limit me")))).status).toBe(
        GRPC_STATUS_CODE.RESOURCE_EXHAUSTED,
      );
      expect((await erin.listTasks(listAll)).totalSize).toBe(before);
    });

    it("a failure with no protocol word is INTERNAL, its detail kept out; the database gone is UNAVAILABLE", async () => {
      const buggy = await statusOf(
        (await clientAs("buggy")).getTask({ tenant: "", id: "x" } as never),
      );
      expect(buggy.status).toBe(GRPC_STATUS_CODE.INTERNAL);
      expect(buggy.message).not.toContain("secret-internal-detail");
      const gone = await statusOf(
        (await clientAs("db-gone")).getTask({ tenant: "", id: "x" } as never),
      );
      expect(gone.status).toBe(GRPC_STATUS_CODE.UNAVAILABLE);
      // A run that cannot start fails its task, without the internal message.
      const task = await (await clientAs("alice")).sendMessage(send("boom"));
      expect(JSON.stringify(task)).not.toContain("secret-internal-detail");
    });

    it("a drain ends a stream still open, and the port closes", async () => {
      const alice = await clientAs("alice");
      const stream = alice.sendMessageStream(send("slow work"));
      const first = await stream.next();
      expect((first.value as StreamResponse | undefined)?.payload?.$case).toBe("task");
      await listener.drain(100);
      const rest: unknown[] = [];
      const ended = await (async () => {
        try {
          for await (const event of stream) rest.push(event);
          return "ended";
        } catch {
          return "cut";
        }
      })();
      expect(["ended", "cut"]).toContain(ended);
      // The run is not the port's: it goes on. The port is closed.
      expect(h.engine.live()).toBeGreaterThan(0);
      expect((await statusOf(alice.getTask({ tenant: "", id: "x" } as never))).status).toBe(
        GRPC_STATUS_CODE.UNAVAILABLE,
      );
    });
  },
  { fresh: "suite" },
);
