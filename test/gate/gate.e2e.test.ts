// The gate attacked through the real server (DESIGN §11), with a classifier stub that answers
// `read-only` to every command — the case where nothing but the gate's own rules stands between
// the model and the workspace:
// - a batch parks whole: an auto-approved write in the same batch as a call that needs a person is
//   not written before the answer, and not at all after a rejection;
// - HTTP approval is independent of risk: under `auto`, a fetch outside the caller's URL grants
//   asks, and a granted URL redirecting outside them stops at the hop;
// - classifier calls are admitted against the caller's budget: a 100-token caller's step of many
//   commands makes no classifier call past its budget, and the rest fail closed.
import { access, readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import {
  addCaller,
  asTask,
  copyPolicies,
  type Peergate,
  readTaskRunId,
  removeTempDirs,
  startPeergateOn,
  userMessage,
  waitForRun,
} from "../e2e/support.ts";
import {
  type ChatRequest,
  createOpenAiStub,
  readContent,
  readScenario,
  type StubStep,
} from "../support/openai-stub.ts";

type Call = { id: string; name: string; arguments: string };
const call = (id: string, name: string, args: unknown): Call => ({
  id,
  name,
  arguments: JSON.stringify(args),
});

const scenarios: Record<string, StubStep[]> = {};
const classifierRequests: string[] = [];

function isClassifierRequest(request: ChatRequest): boolean {
  return request.messages.some(
    (m) =>
      m.role === "system" && readContent(m).startsWith("You rate the risk of one shell command"),
  );
}

let web: Server;
let webUrl: string;
let policiesDir: string;
const webHits: string[] = [];
const stub = createOpenAiStub();
let modelBaseUrl: string;

beforeAll(async () => {
  stub.respondWith(async (request) => {
    if (isClassifierRequest(request)) {
      classifierRequests.push(request.messages.map(readContent).join("\n"));
      // The attacker's best case: every command rated read-only.
      return { text: "read-only" };
    }
    const steps = scenarios[readScenario(request) ?? ""];
    if (!steps) return { text: "no script for this conversation" };
    const turn = request.messages.filter((m) => m.role === "assistant").length;
    return steps[Math.min(turn, steps.length - 1)] as StubStep;
  });
  modelBaseUrl = await stub.listen();
  web = createServer((req, res) => {
    webHits.push(req.url ?? "");
    if (req.url === "/docs/away") {
      // Same loopback server, another host name: outside a grant on 127.0.0.1.
      const port = (web.address() as AddressInfo).port;
      res.writeHead(302, { location: `http://localhost:${port}/elsewhere/secret` });
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`page ${req.url}`);
  });
  await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
  webUrl = `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
  policiesDir = await copyPolicies();
  const agentFile = path.join(policiesDir, "agent.yaml");
  const text = await readFile(agentFile, "utf8");
  await writeFile(
    agentFile,
    `${text.replace(/^tools: .*$/m, "tools: [files, context, web, shell]")}\nwebFetch:\n  allowAddresses: ["127.0.0.1", "::1"]\n`,
  );
});
afterAll(async () => {
  await stub.close();
  await new Promise<void>((resolve) => web?.close(() => resolve()));
  await removeTempDirs();
});

describe("the gate through the real server [pglite]", () => {
  let peergate: Peergate;
  beforeAll(async () => {
    peergate = await startPeergateOn("pglite", { policiesDir, modelBaseUrl });
  }, 300_000);
  afterAll(async () => peergate?.stop(), 120_000);

  async function send(secret: string, text: string) {
    const client = await peergate.client(secret);
    return asTask(await client.sendMessage({ message: userMessage(text) } as never));
  }
  const callsOf = (run: { toolCalls: { callId: string }[] }) =>
    Object.fromEntries(run.toolCalls.map((c: any) => [c.callId, c]));
  const operator = async () => ({
    "x-peergate-operator-token": await createOperatorToken({
      services: peergate.server.services,
      actor: "system",
    }),
  });
  const exists = (file: string) =>
    access(path.join(peergate.workspace, file)).then(
      () => true,
      () => false,
    );

  it("a batch parks whole: the auto-approved write waits for the answer, and a rejection leaves it unwritten", async () => {
    scenarios.whole = [
      {
        calls: [
          call("b_write", "write_file", { path: "batch-note.txt", content: "written\n" }),
          // The caller's prompt override: this call asks even under auto.
          call("b_cmd", "execute_command", { program: "echo", args: ["hi"] }),
        ],
      },
      { text: "done" },
    ];
    const peer = await addCaller(peergate, {
      name: "whole-batch",
      kind: "peer",
      tier: "private",
      allow: ["execute_command", "write_file"],
      approvalPolicy: "auto",
      toolOverrides: { execute_command: "prompt" },
    });
    const task = await send(peer.secret, "scenario:whole go");
    const runId = readTaskRunId(task);
    const parked = await waitForRun(peergate, runId, ["parked"], 120_000);
    expect(parked.pending.callId).toBe("b_cmd");
    // Nothing of the batch ran before the answer: the write is decided, not done.
    expect(await exists("batch-note.txt")).toBe(false);
    expect(callsOf(parked).b_write?.status).toBe("not-started");
    expect(callsOf(parked).b_write?.decision).toMatchObject({ action: "run" });

    const rejected = await peergate.admin(
      "POST",
      `/runs/${runId}/reject`,
      { callId: parked.pending.callId, reason: "no" },
      await operator(),
    );
    expect(rejected.status).toBe(202);
    const done = await waitForRun(peergate, runId, ["completed"], 120_000);
    expect(callsOf(done).b_cmd?.status).toBe("rejected");
    expect(callsOf(done).b_write?.status).toBe("not-started");
    expect(await exists("batch-note.txt")).toBe(false);
  }, 180_000);

  it("a batch parks whole: once approved, the held write and the approved call both run", async () => {
    scenarios.approved = [
      {
        calls: [
          call("a_write", "write_file", { path: "approved-note.txt", content: "written\n" }),
          call("a_cmd", "execute_command", { program: "echo", args: ["hi"] }),
        ],
      },
      { text: "done" },
    ];
    const peer = await addCaller(peergate, {
      name: "approved-batch",
      kind: "peer",
      tier: "private",
      allow: ["execute_command", "write_file"],
      approvalPolicy: "auto",
      toolOverrides: { execute_command: "prompt" },
    });
    const runId = readTaskRunId(await send(peer.secret, "scenario:approved go"));
    const parked = await waitForRun(peergate, runId, ["parked"], 120_000);
    expect(await exists("approved-note.txt")).toBe(false);
    const approved = await peergate.admin(
      "POST",
      `/runs/${runId}/approve`,
      { callId: parked.pending.callId, argsDigest: parked.pending.argsDigest },
      await operator(),
    );
    expect(approved.status).toBe(202);
    const done = await waitForRun(peergate, runId, ["completed"], 120_000);
    expect(callsOf(done).a_write?.status).toBe("completed");
    expect(callsOf(done).a_cmd?.status).toBe("completed");
    expect(await readFile(path.join(peergate.workspace, "approved-note.txt"), "utf8")).toBe(
      "written\n",
    );
  }, 180_000);

  it("a held call is decided again when its batch resumes: narrowed while it waited, it asks instead of running", async () => {
    scenarios.narrowed = [
      {
        calls: [
          call("n_write", "write_file", { path: "narrowed-note.txt", content: "written\n" }),
          call("n_cmd", "execute_command", { program: "echo", args: ["hi"] }),
        ],
      },
      { text: "done" },
    ];
    const peer = await addCaller(peergate, {
      name: "narrowed-batch",
      kind: "peer",
      tier: "private",
      allow: ["execute_command", "write_file"],
      approvalPolicy: "auto",
      toolOverrides: { execute_command: "prompt" },
    });
    const runId = readTaskRunId(await send(peer.secret, "scenario:narrowed go"));
    const parked = await waitForRun(peergate, runId, ["parked"], 120_000);
    expect(parked.pending.callId).toBe("n_cmd");
    expect(callsOf(parked).n_write?.decision).toMatchObject({ action: "run" });

    // While the batch waits, the operator narrows the caller: under read-only a write asks.
    const narrowed = await peergate.admin(
      "PATCH",
      "/callers/narrowed-batch",
      { approvalPolicy: "read-only" },
      await operator(),
    );
    expect(narrowed.status).toBe(200);
    const approved = await peergate.admin(
      "POST",
      `/runs/${runId}/approve`,
      { callId: parked.pending.callId, argsDigest: parked.pending.argsDigest },
      await operator(),
    );
    expect(approved.status).toBe(202);

    // The approved command ran; the write the old policy let run now waits for a person.
    const again = await waitForRun(
      peergate,
      runId,
      ["parked"],
      120_000,
      (run: { pending?: { callId?: string } }) => run.pending?.callId === "n_write",
    );
    expect(callsOf(again).n_cmd?.status).toBe("completed");
    expect(callsOf(again).n_write?.status).toBe("parked");
    expect(String(callsOf(again).n_write?.decision?.reason)).toContain(
      "narrowed while its batch waited",
    );
    expect(await exists("narrowed-note.txt")).toBe(false);

    // Turned down, it is never written.
    const rejected = await peergate.admin(
      "POST",
      `/runs/${runId}/reject`,
      { callId: "n_write", reason: "not now" },
      await operator(),
    );
    expect(rejected.status).toBe(202);
    const done = await waitForRun(peergate, runId, ["completed"], 120_000);
    expect(callsOf(done).n_write?.status).toBe("rejected");
    expect(await exists("narrowed-note.txt")).toBe(false);
  }, 240_000);

  it("under auto, a fetch outside the caller's URL grants asks, and a redirect out of them stops at the hop", async () => {
    scenarios.grants = [
      {
        calls: [
          call("g_in", "web_fetch", { url: `${webUrl}/docs/page` }),
          call("g_out", "web_fetch", { url: `${webUrl}/private/page` }),
        ],
      },
      { text: "done" },
    ];
    const peer = await addCaller(peergate, {
      name: "auto-fetcher",
      kind: "peer",
      tier: "internal",
      allow: ["web_fetch"],
      approvalPolicy: "auto",
      whenNobody: "decline",
      urlGrants: { prefixes: [`${webUrl}/docs`] },
    });
    const before = webHits.length;
    const run = await waitForRun(
      peergate,
      readTaskRunId(await send(peer.secret, "scenario:grants read")),
      ["completed"],
      120_000,
    );
    const calls = callsOf(run);
    expect(calls.g_in?.status).toBe("completed");
    expect(calls.g_out?.status).toBe("declined");
    expect(calls.g_out?.decision).toMatchObject({ action: "decline", rule: "url-grant" });
    expect(webHits.slice(before)).not.toContain("/private/page");

    scenarios.hop = [
      { calls: [call("h_away", "web_fetch", { url: `${webUrl}/docs/away` })] },
      { text: "done" },
    ];
    const parker = await addCaller(peergate, {
      name: "auto-hopper",
      kind: "peer",
      tier: "internal",
      allow: ["web_fetch"],
      approvalPolicy: "auto",
      urlGrants: { prefixes: [`${webUrl}/docs`] },
    });
    const hopStart = webHits.length;
    const hopped = await waitForRun(
      peergate,
      readTaskRunId(await send(parker.secret, "scenario:hop read")),
      ["parked"],
      120_000,
    );
    expect(callsOf(hopped).h_away?.status).toBe("parked");
    expect(callsOf(hopped).h_away?.decision.urlReason).toContain("Redirect 1");
    expect(hopped.pending.callId).toBe("h_away");
    expect(webHits.slice(hopStart)).toEqual(["/docs/away"]);
  }, 180_000);

  it("a 100-token caller's step of many commands makes no classifier call past its budget", async () => {
    const commands = Array.from({ length: 20 }, (_, i) =>
      call(`k_${i}`, "execute_command", { program: "ls", args: [`budget-probe-${i}`] }),
    );
    scenarios.budget = [{ calls: commands }, { text: "done" }];
    const peer = await addCaller(peergate, {
      name: "small-budget",
      kind: "peer",
      tier: "private",
      allow: ["execute_command"],
      approvalPolicy: "read-only",
      whenNobody: "decline",
      budgets: { tokens: 100 },
    });
    const before = classifierRequests.length;
    const run = await waitForRun(
      peergate,
      readTaskRunId(await send(peer.secret, "scenario:budget look")),
      ["completed", "failed"],
      120_000,
    );
    const asked = classifierRequests.slice(before).filter((p) => p.includes("budget-probe"));
    // The step itself spent 25 of the 100 tokens; each classifier call spends 25 more.
    expect(asked.length).toBeLessThanOrEqual(3);
    const calls = callsOf(run);
    const unrated = Object.values(calls).filter(
      (c: any) => c.decision?.classifier?.failure === "budget",
    );
    expect(unrated.length).toBe(20 - asked.length);
    for (const c of unrated as any[]) {
      expect(c.status).toBe("declined");
      expect(c.decision.classifier.verdict).toBe("high-risk");
      expect(c.decision.classifier.reason).toContain("budget");
    }
    expect(run.budgetUsed.tokens).toBeGreaterThanOrEqual(100);
  }, 180_000);
});
