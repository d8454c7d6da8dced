// The gRPC port (PEERGATE_GRPC_PORT), as src/server.ts's listener is the HTTP one: bound by the
// core once its database is ready (so the card can name the port actually bound), answering
// UNAVAILABLE "starting" until `serve` puts the A2A implementation in (grpc-service.ts), and
// stopped in two steps: `drain` refuses new calls and waits for those in flight, then cuts the
// rest; `close` cuts at once (a failed start-up). Plaintext: TLS is a proxy's job, as for HTTP.
import { A2AService } from "@a2a-js/sdk/server/grpc";
import * as grpc from "@grpc/grpc-js";
import type { A2aGrpcImplementation } from "./grpc-service.ts";

export type GrpcListenerOptions = {
  host: string;
  /** 0: any free port. */
  port: number;
  /** The largest request message read, in bytes (POST /a2a's body limit); larger: RESOURCE_EXHAUSTED. */
  maxMessageBytes: number;
};

/** The bound port: `address` is `host:port` as bound (the port chosen when 0 was asked for). */
export type GrpcListening = { readonly address: string; close(): Promise<void> };

export type GrpcListener = {
  listen(): Promise<GrpcListening>;
  serve(implementation: A2aGrpcImplementation): void;
  /** Stops taking calls, waits up to `timeoutMs` for those in flight, then cuts what is left. */
  drain(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
};

type Method = keyof typeof A2AService;

function hostPort(host: string, port: number): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]:${port}` : `${host}:${port}`;
}

export function createGrpcListener(options: GrpcListenerOptions): GrpcListener {
  const server = new grpc.Server({
    "grpc.max_receive_message_length": options.maxMessageBytes,
    // Streams one connection may hold open at once (Node's HTTP/2 default is unlimited).
    "grpc.max_concurrent_streams": 100,
  });
  let implementation: A2aGrpcImplementation | undefined;
  const starting = { code: grpc.status.UNAVAILABLE, details: "starting; retry shortly" };
  // Each method delegates to the implementation once it is in; before that, UNAVAILABLE.
  const delegating = Object.fromEntries(
    (Object.keys(A2AService) as Method[]).map((method) => [
      method,
      (
        call: grpc.ServerWritableStream<unknown, unknown>,
        callback?: grpc.sendUnaryData<unknown>,
      ) => {
        const target = implementation?.[method] as
          | ((c: typeof call, cb?: typeof callback) => void)
          | undefined;
        if (target) return target(call, callback);
        if (A2AService[method].responseStream) {
          call.emit("error", starting);
          return;
        }
        callback?.(starting, null);
      },
    ]),
  ) as unknown as grpc.UntypedServiceImplementation;
  server.addService(A2AService, delegating);

  let closed: Promise<void> | undefined;
  const close = () => {
    closed ??= Promise.resolve().then(() => server.forceShutdown());
    return closed;
  };
  let draining: Promise<void> | undefined;
  const drain = (timeoutMs: number) => {
    draining ??= new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, timeoutMs);
      timer.unref();
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    return draining.then(close);
  };

  return {
    async listen() {
      const port = await new Promise<number>((resolve, reject) => {
        server.bindAsync(
          hostPort(options.host, options.port),
          grpc.ServerCredentials.createInsecure(),
          (error, bound) => (error ? reject(error) : resolve(bound)),
        );
      });
      return { address: hostPort(options.host, port), close };
    },
    serve(next) {
      implementation = next;
    },
    drain,
    close,
  };
}
