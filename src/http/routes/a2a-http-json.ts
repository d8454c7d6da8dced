// The A2A 1.0 HTTP+JSON binding on Hono (spec §11), beside POST /a2a and through the same guards:
// a browser Origin refused, no credential in the query (`pageToken` is ListTasks' cursor, not
// one), then the caller authenticated and throttled by `authenticate` before anything of the
// request is read. The binding itself (params, errors, media types) is src/a2a/http-json.ts and
// the service's `handleHttpJson`, which shares the JSON-RPC endpoint's handler, store and checks;
// this file only moves HTTP in and out.
//
//   POST   /message:send                                    SendMessage
//   POST   /message:stream                                  SendStreamingMessage (SSE)
//   GET    /tasks                                           ListTasks (query parameters)
//   GET    /tasks/{id}                                      GetTask (?historyLength=)
//   POST   /tasks/{id}:cancel                               CancelTask
//   GET    /tasks/{id}:subscribe  (and POST)                SubscribeToTask (SSE)
//   POST   /tasks/{id}/pushNotificationConfigs              CreateTaskPushNotificationConfig (201)
//   GET    /tasks/{id}/pushNotificationConfigs              ListTaskPushNotificationConfigs
//   GET    /tasks/{id}/pushNotificationConfigs/{configId}   GetTaskPushNotificationConfig
//   DELETE /tasks/{id}/pushNotificationConfigs/{configId}   DeleteTaskPushNotificationConfig (204)
//   GET    /extendedAgentCard                               GetExtendedAgentCard
//
// `{id}:cancel` shares its path segment with `{id}`, so `/tasks/:target` is read from the raw
// path (parseTaskTarget): an id is percent-decoded only after its action is split off.
import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { type HttpJsonCall, type HttpJsonMethod, parseTaskTarget } from "../../a2a/http-json.ts";
import { readRequestedVersion } from "../../a2a/json-rpc.ts";
import type { A2aService } from "../../a2a/service.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import type { A2aEnv } from "../middleware/a2a-auth.ts";
import { refuseBrowserOrigins, refuseQueryCredentials } from "../middleware/api-guards.ts";
import { writeEventStream } from "../sse.ts";

export type A2aHttpJsonRouteDeps = {
  a2a: A2aService;
  authenticate: MiddlewareHandler<A2aEnv>;
  keepAliveMs: number;
};

type A2aContext = Context<A2aEnv>;

/** Every query parameter with all its values. */
function readQuery(c: Context): Map<string, string[]> {
  const query = new Map<string, string[]>();
  if (!c.req.url.includes("?")) return query;
  for (const [name, value] of new URL(c.req.url).searchParams) {
    const values = query.get(name);
    if (values) values.push(value);
    else query.set(name, [value]);
  }
  return query;
}

/** The `index`-th segment of the path as sent (still percent-encoded). */
function rawSegment(c: Context, index: number): string {
  return new URL(c.req.url).pathname.split("/")[index] ?? "";
}

const noRoute = () => new NotFoundError("no such route");

export function a2aHttpJsonRoutes(deps: A2aHttpJsonRouteDeps): Hono<A2aEnv> {
  const app = new Hono<A2aEnv>();
  const guards = [
    refuseBrowserOrigins(),
    refuseQueryCredentials({ allow: ["pageToken"] }),
    deps.authenticate,
  ] as const;

  async function answer(
    c: A2aContext,
    method: HttpJsonMethod,
    path: Record<string, string>,
    readsBody: boolean,
  ): Promise<Response> {
    const call: HttpJsonCall = {
      method,
      path,
      query: readQuery(c),
      body: readsBody ? await c.req.text() : undefined,
    };
    const reply = await deps.a2a.handleHttpJson(call, {
      caller: c.get("caller"),
      version: readRequestedVersion(c.req.header("a2a-version"), c.req.query("A2A-Version")),
      contentType: c.req.header("content-type"),
      accept: c.req.header("accept"),
      lastEventId: c.req.header("last-event-id"),
      extensions: c.req.header("a2a-extensions"),
    });
    if (reply.extensions && reply.extensions.length > 0) {
      c.header("A2A-Extensions", reply.extensions.join(", "));
    }
    switch (reply.type) {
      case "empty":
        return c.body(null, 204);
      case "sse":
        return writeEventStream(c, reply.stream, {
          keepAliveMs: deps.keepAliveMs,
          toEvent: (event) => event,
        });
      default: {
        // Tasks change and belong to one caller: no cache keeps an answer.
        c.header("Cache-Control", "no-store");
        const status = reply.status as ContentfulStatusCode;
        return c.body(JSON.stringify(reply.body), status, { "Content-Type": reply.contentType });
      }
    }
  }

  /** `/tasks/{target}`: the task's id and what is asked of it; an unknown action is no route. */
  function readTarget(c: A2aContext) {
    const target = parseTaskTarget(rawSegment(c, 2));
    if (target.ok) return target;
    if (target.reason === "bad-encoding") {
      throw new ValidationError([
        { field: "path.id", message: "the task id in the path is not valid percent-encoding" },
      ]);
    }
    throw noRoute();
  }

  app.post("/message:send", ...guards, (c) => answer(c, "SendMessage", {}, true));
  app.post("/message:stream", ...guards, (c) => answer(c, "SendStreamingMessage", {}, true));
  app.get("/tasks", ...guards, (c) => answer(c, "ListTasks", {}, false));
  app.get("/tasks/:target", ...guards, (c) => {
    const target = readTarget(c);
    if (target.action === "cancel") throw noRoute();
    const method = target.action === "subscribe" ? "SubscribeToTask" : "GetTask";
    return answer(c, method, { id: target.id }, false);
  });
  app.post("/tasks/:target", ...guards, (c) => {
    const target = readTarget(c);
    if (target.action === "get") throw noRoute();
    const method = target.action === "cancel" ? "CancelTask" : "SubscribeToTask";
    return answer(c, method, { id: target.id }, true);
  });
  const configs = "/tasks/:taskId/pushNotificationConfigs";
  app.post(configs, ...guards, (c) =>
    answer(c, "CreateTaskPushNotificationConfig", { taskId: c.req.param("taskId") }, true),
  );
  app.get(configs, ...guards, (c) =>
    answer(c, "ListTaskPushNotificationConfigs", { taskId: c.req.param("taskId") }, false),
  );
  app.get(`${configs}/:configId`, ...guards, (c) =>
    answer(
      c,
      "GetTaskPushNotificationConfig",
      { taskId: c.req.param("taskId"), id: c.req.param("configId") },
      false,
    ),
  );
  app.delete(`${configs}/:configId`, ...guards, (c) =>
    answer(
      c,
      "DeleteTaskPushNotificationConfig",
      { taskId: c.req.param("taskId"), id: c.req.param("configId") },
      false,
    ),
  );
  app.get("/extendedAgentCard", ...guards, (c) => answer(c, "GetExtendedAgentCard", {}, false));
  return app;
}
