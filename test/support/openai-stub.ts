// An OpenAI-compatible `/v1/chat/completions` on 127.0.0.1 whose "model" plays scripted steps,
// streamed (SSE chunks, as `@ai-sdk/openai-compatible` asks by default) or not. Shared by the
// run engine's provider test, the end-to-end suites (test/e2e/) and bench/a2a.ts.
//
//   const stub = createOpenAiStub();
//   const baseUrl = await stub.listen();         // http://127.0.0.1:<port>/v1
//   stub.play([{ calls: [{ id: "c1", name: "ls", arguments: "{}" }] }, { text: "done" }]);
//   stub.respondWith((request) => ({ text: "answer" }));   // or pick the step per request
//
// `play` answers the n-th request with the n-th step (one conversation at a time). `respondWith`
// picks a step from the request itself, so several conversations can run at once: count the
// assistant turns in `request.messages` to know which step a conversation is on.
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type StubCall = { id: string; name: string; arguments: string };

export type StubStep = {
  text?: string;
  calls?: StubCall[];
  /**
   * Answer only once this settles: a slow model that answers when the test says (after a fault),
   * never after a fixed delay.
   */
  until?: () => Promise<unknown>;
  /** Start the answer, then never finish it: ends when the client goes away (an aborted call). */
  hang?: boolean;
  usage?: { prompt: number; completion: number };
  /** Answer with this HTTP error and an OpenAI-style error body instead (a failing provider). */
  error?: { status: number; message: string };
};

export type ChatMessage = {
  role: string;
  content?: unknown;
  tool_call_id?: string;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
};

export type ChatRequest = {
  model: string;
  stream?: boolean;
  messages: ChatMessage[];
  tools?: Array<{ type: string; function: { name: string } }>;
};

export type RecordedRequest = { body: ChatRequest; authorization: string | undefined };

export type StubScript = (request: ChatRequest, index: number) => StubStep | Promise<StubStep>;

export type OpenAiStub = {
  readonly server: Server;
  /** Every request, in arrival order (`play` clears it). Off with `record: false`. */
  readonly requests: RecordedRequest[];
  /** Answers the n-th request from now with `steps[n]` (then "nothing more to say"). */
  play(steps: StubStep[]): void;
  /** Answers each request with what `script` returns for it. */
  respondWith(script: StubScript): void;
  listen(): Promise<string>;
  close(): Promise<void>;
};

/** The text of a message's content, whether a string or a list of parts. */
export function readContent(message: ChatMessage | undefined): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part?.text === "string" ? (part.text as string) : ""))
      .join("");
  }
  return "";
}

/** How many times the model has answered in this conversation: which step it is on. */
export function countAssistantTurns(request: ChatRequest): number {
  return request.messages.filter((m) => m.role === "assistant").length;
}

export function createOpenAiStub(options: { record?: boolean } = {}): OpenAiStub {
  const record = options.record ?? true;
  let script: StubScript = () => ({ text: "nothing more to say" });
  let served = 0;
  const requests: RecordedRequest[] = [];

  const respond = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
    const index = served++;
    if (record) requests.push({ body, authorization: req.headers.authorization });
    const step = await script(body, index);
    if (step.until) await step.until();
    if (step.error) {
      res.writeHead(step.error.status, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: step.error.message, type: "server_error" } }));
      return;
    }
    const toolCalls = (step.calls ?? []).map((call, i) => ({
      index: i,
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: call.arguments },
    }));
    const finish = toolCalls.length > 0 ? "tool_calls" : "stop";
    const prompt = step.usage?.prompt ?? 21;
    const completion = step.usage?.completion ?? 4;
    const usage = {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
    };
    const base = { id: `chatcmpl-${index + 1}`, created: 1_700_000_000, model: body.model };

    if (!body.stream) {
      if (step.hang) {
        await once(res, "close");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          ...base,
          object: "chat.completion",
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: step.text ?? null,
                ...(toolCalls.length > 0
                  ? { tool_calls: toolCalls.map(({ index: _i, ...call }) => call) }
                  : {}),
              },
              finish_reason: finish,
            },
          ],
          usage,
        }),
      );
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    const chunk = (delta: unknown, finishReason: string | null = null) =>
      send({
        ...base,
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta, finish_reason: finishReason }],
      });
    chunk({ role: "assistant", content: "" });
    if (step.text) {
      // In two pieces, as a real server streams.
      const half = Math.ceil(step.text.length / 2);
      chunk({ content: step.text.slice(0, half) });
      chunk({ content: step.text.slice(half) });
    }
    if (step.hang) {
      await once(res, "close");
      return;
    }
    for (const call of toolCalls) {
      chunk({
        tool_calls: [
          {
            index: call.index,
            id: call.id,
            type: "function",
            function: { name: call.function.name, arguments: "" },
          },
        ],
      });
      chunk({
        tool_calls: [{ index: call.index, function: { arguments: call.function.arguments } }],
      });
    }
    chunk({}, finish);
    send({ ...base, object: "chat.completion.chunk", choices: [], usage });
    res.write("data: [DONE]\n\n");
    res.end();
  };

  const server: Server = createServer((req, res) => {
    respond(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.keepAliveTimeout = 30_000;
  return {
    server,
    requests,
    play(steps) {
      served = 0;
      requests.length = 0;
      script = (_request, index) => steps[index] ?? { text: "nothing more to say" };
    },
    respondWith(next) {
      script = next;
    },
    async listen(): Promise<string> {
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Named scripts for one stub shared by many runs: a conversation picks one by naming it. */
export type Scenarios = Record<string, StubStep[]>;

/** The scenario a conversation names (`scenario:<name>` in its first user message). */
export function readScenario(request: ChatRequest): string | undefined {
  const user = request.messages.find((m) => m.role === "user");
  return /scenario:([a-z0-9-]+)/.exec(readContent(user))?.[1];
}
