// The stream sends the answer once (issue 15), through the real server and a scripted model: a
// client that prints every artifact update of a SendStreamingMessage as it arrives prints the
// answer once, over raw SSE (A2A 1.0 and v0.3) and through the a2a-js client; the stored task and
// a blocking SendMessage hold the whole answer. Text the model says before a tool call ("Let me
// check") is sent as it comes, and the answer's first chunk replaces it (`append: false`): the
// answer itself still arrives once.
import { parseSseStream, type StreamResponse } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresSkipReason } from "../support/databases.ts";
import {
  addCaller,
  asTask,
  collectStream,
  copyPolicies,
  type Peergate,
  removeTempDirs,
  type ScriptedModel,
  startPeergateOn,
  startScriptedModel,
  textOf,
  userMessage,
} from "./support.ts";

const answer = "The answer is forty-two, as always.";
const narration = "Let me check the time first.";

const scenarios = {
  plain: [{ text: answer }],
  narrate: [
    { text: narration, calls: [{ id: "call_time", name: "get_time", arguments: "{}" }] },
    { text: answer },
  ],
};

let model: ScriptedModel;
let policiesDir: string;

beforeAll(async () => {
  model = await startScriptedModel(scenarios);
  policiesDir = await copyPolicies();
});
afterAll(async () => {
  await model?.close();
  await removeTempDirs();
});

type Chunk = { text: string; append: boolean; lastChunk: boolean };

/** Applies A2A's artifact semantics: `append` adds to the artifact, otherwise it is replaced. */
function assemble(chunks: readonly Chunk[]): string {
  return chunks.reduce((text, c) => (c.append ? text + c.text : c.text), "");
}

const occurrences = (haystack: string, needle: string) => haystack.split(needle).length - 1;

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `a stream carries the answer once [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;
      let secret: string;

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, { policiesDir, modelBaseUrl: model.baseUrl });
        secret = (await addCaller(peergate, { name: `reader-${kind}`, kind: "peer" })).secret;
      });
      afterAll(async () => peergate?.stop());

      /** A raw SSE client: POSTs the streaming call, returns each event's JSON-RPC result. */
      const rawStream = async (text: string, version: "1.0" | "0.3") => {
        const message =
          version === "1.0"
            ? { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] }
            : {
                kind: "message",
                messageId: crypto.randomUUID(),
                role: "user",
                parts: [{ kind: "text", text }],
              };
        const response = await fetch(`${peergate.url}/a2a`, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            Accept: "text/event-stream",
            Authorization: `Bearer ${secret}`,
            ...(version === "1.0" ? { "A2A-Version": "1.0" } : {}),
          },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: version === "1.0" ? "SendStreamingMessage" : "message/stream",
            params: { message },
          }),
        });
        expect(response.status).toBe(200);
        const results: Record<string, any>[] = [];
        for await (const event of parseSseStream(response)) {
          results.push((JSON.parse(event.data) as { result: Record<string, any> }).result);
        }
        return results;
      };

      const rawChunks = (results: Record<string, any>[], version: "1.0" | "0.3"): Chunk[] =>
        results.flatMap((r) => {
          const update =
            version === "1.0" ? r.artifactUpdate : r.kind === "artifact-update" ? r : undefined;
          if (update?.artifact?.name !== "answer") return [];
          const parts = (update.artifact.parts ?? []) as { text?: string }[];
          return [
            {
              text: parts.map((p) => p.text ?? "").join(""),
              append: update.append === true,
              lastChunk: update.lastChunk === true,
            },
          ];
        });

      const taskIdOf = (results: Record<string, any>[], version: "1.0" | "0.3") =>
        String(version === "1.0" ? results[0]?.task?.id : results[0]?.id);

      for (const version of ["1.0", "0.3"] as const) {
        it(`raw SSE (${version}): the artifact updates, concatenated, are the answer once`, async () => {
          const results = await rawStream("scenario:plain What is it?", version);
          const chunks = rawChunks(results, version);
          expect(chunks.map((c) => c.text).join("")).toBe(answer);
          expect(chunks.at(-1)?.lastChunk).toBe(true);
          expect(assemble(chunks)).toBe(answer);
          // The stored task has it whole, once.
          const client = await peergate.client(secret);
          const stored = await client.getTask({ id: taskIdOf(results, version) } as never);
          expect(stored.artifacts.map((a) => textOf(a.parts))).toEqual([answer]);
        });

        it(`raw SSE (${version}): text before a tool call is replaced, the answer comes once`, async () => {
          const results = await rawStream("scenario:narrate What time is it?", version);
          const chunks = rawChunks(results, version);
          const printed = chunks.map((c) => c.text).join("");
          expect(occurrences(printed, answer)).toBe(1);
          expect(occurrences(printed, narration)).toBe(1);
          expect(assemble(chunks)).toBe(answer);
          expect(chunks.at(-1)?.lastChunk).toBe(true);
          const client = await peergate.client(secret);
          const stored = await client.getTask({ id: taskIdOf(results, version) } as never);
          expect(stored.artifacts.map((a) => textOf(a.parts))).toEqual([answer]);
        });
      }

      it("a2a-js client: the streamed answer arrives once; SendMessage returns it whole", async () => {
        const client = await peergate.client(secret);
        const { events, error } = await collectStream(
          client.sendMessageStream({
            message: userMessage("scenario:plain Stream it."),
          } as never),
        );
        expect(error).toBeUndefined();
        const chunks = events.flatMap((e: StreamResponse) =>
          e.payload?.$case === "artifactUpdate" ? [e.payload.value] : [],
        );
        expect(chunks.map((c) => textOf(c.artifact?.parts)).join("")).toBe(answer);
        expect(chunks.at(-1)?.lastChunk).toBe(true);

        const sent = asTask(
          await client.sendMessage({
            message: userMessage("scenario:narrate Blocking."),
          } as never),
        );
        expect(sent.artifacts.map((a) => textOf(a.parts))).toEqual([answer]);
        expect(textOf(sent.status?.message?.parts)).toBe(answer);
      });
    },
  );
}
