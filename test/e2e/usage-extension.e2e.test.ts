// The usage extension (issue 25) through the real server: the card declares
// `https://peergate.dev/ext/usage/v1`; a caller that activates it with `A2A-Extensions` gets its
// task's usage (tokens, cost, steps, time) and what is left of its own day in the task's metadata,
// and the answer's `A2A-Extensions` header names it back. Without the header, nothing. Never
// anything of another caller: another caller's task is "not found" with the extension on, and a
// caller's day counts its own runs only, however much another caller spends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresSkipReason } from "../support/databases.ts";
import { readSseEvents } from "../support/sse-events.ts";
import {
  addCaller,
  copyPolicies,
  type Peergate,
  removeTempDirs,
  type ScriptedModel,
  startPeergateOn,
  startScriptedModel,
} from "./support.ts";

const uri = "https://peergate.dev/ext/usage/v1";
const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)(
  `the usage extension${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    let model: ScriptedModel;
    let peergate: Peergate;
    const secrets: Record<string, string> = {};

    beforeAll(async () => {
      // 21 prompt + 4 completion tokens per model call (the stub's default usage).
      model = await startScriptedModel({ plain: [{ text: "Here you are." }] });
      peergate = await startPeergateOn("postgres", {
        policiesDir: await copyPolicies(),
        modelBaseUrl: model.baseUrl,
      });
      for (const name of ["alice", "bob"]) {
        secrets[name] = (
          await addCaller(peergate, {
            name,
            kind: "peer",
            budgets: { daily: { tokens: 100_000, runs: 50 } },
          })
        ).secret;
      }
    });
    afterAll(async () => {
      await peergate?.stop();
      await model?.close();
      await removeTempDirs();
    });

    const rpc = (name: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${peergate.url}/a2a`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "A2A-Version": "1.0",
          Authorization: `Bearer ${secrets[name]}`,
          ...headers,
        },
        body: JSON.stringify(body),
      });
    const send = (name: string, headers: Record<string, string> = {}) =>
      rpc(
        name,
        {
          jsonrpc: "2.0",
          id: 1,
          method: "SendMessage",
          params: {
            message: {
              messageId: crypto.randomUUID(),
              role: "ROLE_USER",
              parts: [{ text: "scenario:plain How much did this cost?" }],
            },
          },
        },
        headers,
      );
    const on = { "A2A-Extensions": uri };
    const taskOf = async (response: Response) =>
      ((await response.json()) as { result: { task: Record<string, any> } }).result.task;

    it("the card declares it", async () => {
      const card = (await (
        await fetch(`${peergate.url}/.well-known/agent-card.json`, {
          headers: { "A2A-Version": "1.0" },
        })
      ).json()) as { capabilities: { extensions?: { uri: string; required?: boolean }[] } };
      const entry = card.capabilities.extensions?.find((e) => e.uri === uri);
      expect(entry).toBeDefined();
      expect(entry?.required ?? false).toBe(false);
    });

    it("activated: the task carries its usage and the caller's day; the answer names it", async () => {
      const response = await send("alice", on);
      expect(response.headers.get("a2a-extensions")).toContain(uri);
      const task = await taskOf(response);
      expect(task.status.state).toBe("TASK_STATE_COMPLETED");
      const usage = task.metadata[uri];
      expect(usage).toMatchObject({ tokens: 25, steps: 1, runStatus: "completed" });
      expect(usage.durationMs).toBeGreaterThanOrEqual(0);
      expect(typeof usage.costUsd).toBe("number");
      expect(usage.day.remaining.tokens).toBe(100_000 - usage.day.used.tokens);
      expect(usage.day.remaining.runs).toBe(50 - usage.day.used.runs);
      expect(usage.day.used.tokens).toBeGreaterThanOrEqual(25);
    });

    it("not activated: nothing of it", async () => {
      const response = await send("alice");
      expect(response.headers.get("a2a-extensions")).toBeNull();
      const task = await taskOf(response);
      expect(task.metadata?.[uri]).toBeUndefined();
      // Another extension named alone activates nothing either.
      const other = await send("alice", { "A2A-Extensions": "https://example.com/ext/other" });
      expect(other.headers.get("a2a-extensions")).toBeNull();
      expect((await taskOf(other)).metadata?.[uri]).toBeUndefined();
    });

    it("never anything of another caller", async () => {
      const mine = await taskOf(await send("alice", on));
      const before = mine.metadata[uri].day.used;
      // Bob spends: three runs of his own.
      for (let i = 0; i < 3; i += 1) await send("bob", on);
      const get = (name: string) =>
        rpc(name, { jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: mine.id } }, on);
      // Alice's day is what it was: Bob's runs are not in it.
      const again = (await (await get("alice")).json()) as { result: Record<string, any> };
      expect(again.result.metadata[uri].day.used).toEqual(before);
      // Bob asking for Alice's task with the extension on: not found, and no number of hers.
      const theirs = await get("bob");
      const text = await theirs.text();
      expect(JSON.parse(text).error.code).toBe(-32001);
      expect(text).not.toContain(uri);
      expect(text).not.toContain('"tokens"');
      // Bob's own usage counts his runs, not Alice's.
      const bobs = await taskOf(await send("bob", on));
      expect(bobs.metadata[uri].day.used.runs).toBe(4);
    });

    it("a stream's last update carries it", async () => {
      const response = await rpc(
        "alice",
        {
          jsonrpc: "2.0",
          id: 3,
          method: "SendStreamingMessage",
          params: {
            message: {
              messageId: crypto.randomUUID(),
              role: "ROLE_USER",
              parts: [{ text: "scenario:plain Stream the bill." }],
            },
          },
        },
        { ...on, Accept: "text/event-stream" },
      );
      expect(response.headers.get("a2a-extensions")).toContain(uri);
      const events: Record<string, any>[] = [];
      for await (const event of readSseEvents(response)) {
        events.push((JSON.parse(event.data) as { result: Record<string, any> }).result);
      }
      const last = events.at(-1)?.statusUpdate;
      expect(last?.status?.state).toBe("TASK_STATE_COMPLETED");
      expect(last?.metadata?.[uri]).toMatchObject({ tokens: 25, steps: 1 });
    });
  },
);
