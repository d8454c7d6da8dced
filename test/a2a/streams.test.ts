// SSE streams outliving their readers: a client that goes away mid-stream does not freeze its
// task (the run's updates are still stored to the end), and a quiet stream is kept open with SSE
// comments the client ignores.
import { parseSseStream } from "@a2a-js/sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, sendBody, startHarness, waitFor } from "./support.ts";

describeEachDatabase(
  "A2A streams",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice"], { keepAliveMs: 20 });
    });
    afterAll(async () => {
      await h.close();
    });

    const getState = async (id: string) => {
      const res = await h.rpc("alice", {
        jsonrpc: "2.0",
        id: 1,
        method: "GetTask",
        params: { id },
      });
      const body = (await res.json()) as { result?: { status?: { state?: string } } };
      return body.result?.status?.state;
    };

    it("stores the task's end after the client hung up mid-stream", async () => {
      const res = await h.rpc(
        "alice",
        { ...sendBody("gate and go"), method: "SendStreamingMessage" },
        { Accept: "text/event-stream" },
      );
      const events = parseSseStream(res);
      const first = await events.next();
      const taskId = (JSON.parse(first.value?.data ?? "{}") as { result: { task: { id: string } } })
        .result.task.id;
      // Hang up: the parser cancels the response body.
      await events.return(undefined);
      const callerId = h.callers.get("alice")?.id ?? "";
      await waitFor(() => (h.a2a.openStreamCount(callerId) === 0 ? true : undefined));

      h.engine.release(taskId, "finished without a reader");
      await waitFor(async () =>
        (await getState(taskId)) === "TASK_STATE_COMPLETED" ? true : undefined,
      );
    });

    it("sends keep-alive comments while a stream is quiet, and the client skips them", async () => {
      const res = await h.rpc(
        "alice",
        { ...sendBody("gate slowly"), method: "SendStreamingMessage" },
        { Accept: "text/event-stream" },
      );
      const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      let taskId = "";
      while (reader && !text.includes(": keep-alive")) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += chunk.value;
        const match = /"task":\{"id":"([^"]+)"/.exec(text);
        if (match?.[1]) taskId = match[1];
      }
      expect(text).toContain(": keep-alive");
      h.engine.release(taskId);
      while (reader) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += chunk.value;
      }
      const data = text
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => JSON.parse(line.slice(6)) as { result: Record<string, unknown> });
      expect(JSON.stringify(data.at(-1))).toContain("TASK_STATE_COMPLETED");
    });
  },
  { fresh: "suite" },
);
