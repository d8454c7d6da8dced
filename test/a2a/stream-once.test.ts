// A stream carries the answer once (issue 15): a client that prints every artifact update as it
// comes, without reading `append`, must print the answer once, not its chunks and then the whole
// text again. The `gate` run streams "half " and waits; the test waits until that chunk has
// reached the client, then lets the run finish with "half way": the last update must carry only
// "way". Read raw (SSE as a minimal client sees it) and through the a2a-js client; the stored
// task keeps the whole answer.
import { parseSseStream, type StreamResponse, type Task } from "@a2a-js/sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
import { describeEachDatabase } from "../support/databases.ts";
import { type Harness, sendBody, startHarness, userMessage } from "./support.ts";

type RawArtifactUpdate = {
  append?: boolean;
  lastChunk?: boolean;
  artifact?: { name?: string; parts?: { text?: string }[] };
};

const partsText = (parts: readonly { text?: string }[] | undefined) =>
  (parts ?? []).map((p) => p.text ?? "").join("");

describeEachDatabase(
  "A2A stream: the answer once",
  (ctx) => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(ctx.database, ["alice"]);
    });
    afterAll(async () => {
      await h.close();
    });

    const getTask = async (id: string) => {
      const res = await h.rpc("alice", {
        jsonrpc: "2.0",
        id: 2,
        method: "GetTask",
        params: { id },
      });
      return ((await res.json()) as { result: { artifacts: { parts: { text?: string }[] }[] } })
        .result;
    };

    it("a raw SSE client concatenating the artifact updates gets the answer once", async () => {
      const res = await h.rpc(
        "alice",
        { ...sendBody("gate and go"), method: "SendStreamingMessage" },
        { Accept: "text/event-stream" },
      );
      const updates: RawArtifactUpdate[] = [];
      let taskId = "";
      for await (const event of parseSseStream(res)) {
        const result = (JSON.parse(event.data) as { result: Record<string, unknown> }).result;
        const task = result.task as { id: string } | undefined;
        if (task) taskId = task.id;
        const update = result.artifactUpdate as RawArtifactUpdate | undefined;
        if (update) {
          updates.push(update);
          // The first chunk is in the client's hands: only now does the run finish.
          if (updates.length === 1) h.engine.release(taskId);
        }
      }
      expect(updates.length).toBeGreaterThanOrEqual(2);
      expect(updates.map((u) => partsText(u.artifact?.parts)).join("")).toBe("half way");
      expect(updates.at(-1)?.lastChunk).toBe(true);
      expect(updates.slice(1).every((u) => u.append === true)).toBe(true);
      // The stored task, as GetTask (and a blocking SendMessage) reads it, has the whole answer.
      const stored = await getTask(taskId);
      expect(stored.artifacts.map((a) => partsText(a.parts))).toEqual(["half way"]);
    });

    it("the a2a-js client sees the answer once too", async () => {
      const client = await h.client("alice");
      const events: StreamResponse[] = [];
      let taskId = "";
      for await (const event of client.sendMessageStream({
        message: userMessage("gate again"),
      } as never)) {
        events.push(event);
        if (event.payload?.$case === "task") taskId = event.payload.value.id;
        const chunks = events.filter((e) => e.payload?.$case === "artifactUpdate");
        if (event.payload?.$case === "artifactUpdate" && chunks.length === 1) {
          h.engine.release(taskId);
        }
      }
      const chunks = events.flatMap((e) =>
        e.payload?.$case === "artifactUpdate" ? [e.payload.value] : [],
      );
      const text = chunks
        .map((c) =>
          (c.artifact?.parts ?? [])
            .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
            .join(""),
        )
        .join("");
      expect(text).toBe("half way");
      expect(chunks.at(-1)?.lastChunk).toBe(true);
      const stored = (await client.getTask({ id: taskId } as never)) as Task;
      expect(
        stored.artifacts.map((a) =>
          a.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join(""),
        ),
      ).toEqual(["half way"]);
    });

    it("a blocking SendMessage still returns the whole answer", async () => {
      const res = await h.rpc("alice", sendBody("plain question"));
      const body = (await res.json()) as { result: { task: Task & { artifacts: never } } };
      const task = body.result.task as unknown as { artifacts: { parts: { text?: string }[] }[] };
      expect(task.artifacts.map((a) => partsText(a.parts))).toEqual(["echo: plain question"]);
    });
  },
  { fresh: "suite" },
);
