// GET /admin/v1/events: runs and approvals as they change, over Server-Sent Events, for the console
// and for scripts (`curl -N -H "Authorization: Bearer $TOKEN" …/admin/v1/events`). The stream looks
// at the newest runs every `intervalMs` and tells what moved, so it sees runs of every instance that
// shares the database, not only this one's. Events:
//   run       {id, callerName, status, updatedAt, pendingApproval}  a run was created or changed
//   approval  {runId, callerName, callId, tool, summary, risk}       a run parked on a call
//   answered  {runId, status}                                       a parked run moved on
// With `?once` the stream ends after the first look (which tells every parked run, then `ready`):
// a script's "what waits on me now". A comment line every `keepAliveMs` keeps proxies from closing an idle stream. The guards and the
// admin token check run before this handler (src/http/routes/admin.ts).
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { Handler } from "hono";
import { streamSSE } from "hono/streaming";
import { z } from "zod";
import { UnavailableError } from "../../errors.ts";
import type { PeergateRunEngine } from "../../services/runs/engine.ts";
import type { RunSummary } from "../../services/runs/list-runs.ts";

export type AdminEventsDeps = {
  engine: PeergateRunEngine;
  options?: { intervalMs?: number; keepAliveMs?: number; maxStreams?: number } | undefined;
};

export const eventsRouteConfig = createRoute({
  method: "get",
  path: "/events",
  summary: "Runs and approvals as they change (Server-Sent Events: run, approval, answered)",
  security: [{ adminToken: [] }],
  request: {
    query: z.object({
      once: z
        .string()
        .optional()
        .describe("present: end after the first look (the parked runs, then `ready`)"),
    }),
  },
  responses: {
    200: {
      description:
        "an event stream; each `data:` line is one JSON object (see docs/admin-api.md for the fields)",
      content: { "text/event-stream": { schema: z.string() } },
    },
  },
}) satisfies RouteConfig;

/** How many newest runs each look compares; a change to an older run is not told. */
const window = 200;

export function adminEventsRoute({ engine, options = {} }: AdminEventsDeps): Handler {
  const intervalMs = options.intervalMs ?? 1_000;
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const maxStreams = options.maxStreams ?? 32;
  let open = 0;
  return (c) => {
    if (open >= maxStreams) {
      throw new UnavailableError(`at most ${maxStreams} event streams at once`);
    }
    const once = c.req.query("once") !== undefined;
    open += 1;
    return streamSSE(c, async (stream) => {
      try {
        const seen = new Map<string, string>();
        const parked = new Set<string>();
        let first = true;
        let quietSince = Date.now();
        while (!stream.aborted) {
          const runs = await engine.listRuns({ limit: window });
          // Oldest first, so a script reading the stream sees them in the order they happened.
          for (const run of [...runs].reverse()) {
            const mark = `${run.status}|${run.updatedAt}`;
            const wasParked = parked.has(run.id);
            const isParked = run.status === "parked" && run.pendingApproval !== null;
            if (seen.get(run.id) !== mark) {
              seen.set(run.id, mark);
              if (!first)
                await stream.writeSSE({ event: "run", data: JSON.stringify(runEvent(run)) });
            }
            if (isParked && !wasParked) {
              parked.add(run.id);
              await stream.writeSSE({
                event: "approval",
                data: JSON.stringify(approvalEvent(run)),
              });
            } else if (!isParked && wasParked) {
              parked.delete(run.id);
              await stream.writeSSE({
                event: "answered",
                data: JSON.stringify({ runId: run.id, status: run.status }),
              });
            }
          }
          if (first) {
            first = false;
            await stream.writeSSE({ event: "ready", data: JSON.stringify({ runs: runs.length }) });
            quietSince = Date.now();
            if (once) break;
          }
          if (Date.now() - quietSince >= keepAliveMs) {
            await stream.write(": keep-alive\n\n");
            quietSince = Date.now();
          }
          await stream.sleep(intervalMs);
        }
      } catch {
        // The database went away mid-stream: say so and end; the client reconnects.
        await stream
          .writeSSE({
            event: "error",
            data: JSON.stringify({ detail: "the run store is unavailable" }),
          })
          .catch(() => {});
      } finally {
        open -= 1;
      }
    });
  };
}

function runEvent(run: RunSummary) {
  return {
    id: run.id,
    callerName: run.callerName,
    status: run.status,
    updatedAt: run.updatedAt,
    pendingApproval: run.pendingApproval,
  };
}

function approvalEvent(run: RunSummary) {
  const p = run.pendingApproval;
  return {
    runId: run.id,
    callerName: run.callerName,
    callId: p?.callId ?? null,
    tool: p?.calledTool ?? p?.tool ?? null,
    summary: p?.summary ?? null,
    risk: p?.risk ?? null,
  };
}
