// Precise controls end to end (DESIGN §10), through the real server with a scripted model behind
// the real provider: the command allowlist under a `read-only` policy, the classifier (the stub
// answers its call from the command alone), "nobody there" declining, URL grants for web_fetch
// (inside runs, outside parks, a redirect out of the grant parks), and a caller narrowed while
// its run works. The classifier call is told apart from the run's own by its instructions.
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commands as cliCommands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { quoteUntrusted } from "../../src/policy/quote.ts";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { postgresSkipReason } from "../support/databases.ts";
import {
  type ChatRequest,
  createOpenAiStub,
  readContent,
  readScenario,
  type StubStep,
} from "../support/openai-stub.ts";
import {
  addCaller,
  asTask,
  copyPolicies,
  type Peergate,
  readTaskRunId,
  readToolResults,
  removeTempDirs,
  startPeergateOn,
  userMessage,
  waitForRun,
} from "./support.ts";

type Call = { id: string; name: string; arguments: string };
const exec = (id: string, program: string, args: string[]): Call => ({
  id,
  name: "execute_command",
  arguments: JSON.stringify({ program, args }),
});
const fetchCall = (id: string, url: string): Call => ({
  id,
  name: "web_fetch",
  arguments: JSON.stringify({ url }),
});

/** The run's own requests: scenario name → the steps, by assistant turns so far. */
const scenarios: Record<string, StubStep[]> = {};
/** Runs before the scenario's step `n` is answered (the test narrows a caller there). */
const beforeStep: Record<string, (step: number) => Promise<void>> = {};
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
const stub = createOpenAiStub();
let modelBaseUrl: string;

beforeAll(async () => {
  stub.respondWith(async (request) => {
    if (isClassifierRequest(request)) {
      const prompt = request.messages.map(readContent).join("\n");
      classifierRequests.push(prompt);
      // The scripted classifier rates by the command alone: `ls …` read-only, all else high-risk.
      return { text: /<command>\nls( |\n)/.test(prompt) ? "read-only" : "high-risk" };
    }
    const name = readScenario(request) ?? "";
    const steps = scenarios[name];
    if (!steps) return { text: "no script for this conversation" };
    const turn = request.messages.filter((m) => m.role === "assistant").length;
    await beforeStep[name]?.(turn);
    return steps[Math.min(turn, steps.length - 1)] as StubStep;
  });
  modelBaseUrl = await stub.listen();
  web = createServer((req, res) => {
    if (req.url === "/docs/redirect-out") {
      res.writeHead(302, { location: "/private/secret" });
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`page ${req.url}`);
  });
  await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
  webUrl = `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
  policiesDir = await copyPolicies();
  // The shell and the web on offer; the loopback test server reachable; one agent-wide deny.
  const agentFile = path.join(policiesDir, "agent.yaml");
  const text = await readFile(agentFile, "utf8");
  await writeFile(
    agentFile,
    `${text.replace(/^tools: .*$/m, "tools: [files, context, web, shell]")}\nwebFetch:\n  allowAddresses: ["127.0.0.1"]\n`,
  );
});
afterAll(async () => {
  await stub.close();
  await new Promise<void>((resolve) => web?.close(() => resolve()));
  await removeTempDirs();
});

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `precise controls through the real server [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, { policiesDir, modelBaseUrl });
      });
      afterAll(async () => peergate?.stop());

      async function send(secret: string, text: string) {
        const client = await peergate.client(secret);
        return asTask(await client.sendMessage({ message: userMessage(text) } as never));
      }
      const callsOf = (run: {
        toolCalls: { callId: string; status: string; code: string | null; decision: any }[];
      }) => Object.fromEntries(run.toolCalls.map((c) => [c.callId, c]));

      it("runs an allowlisted git status under read-only while git push parks", async () => {
        scenarios.gitlist = [
          {
            calls: [
              exec("c_status", "git", ["status", "--short"]),
              exec("c_push", "git", ["push"]),
            ],
          },
          { text: "done" },
        ];
        const peer = await addCaller(peergate, {
          name: "gitter",
          kind: "peer",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "read-only",
          commands: ["git status", "git log"],
        });
        const task = await send(peer.secret, "scenario:gitlist look");
        const run = await waitForRun(peergate, readTaskRunId(task), ["parked"]);
        const calls = callsOf(run);
        // Decided to run, and held: a batch parks whole, so nothing of it runs before the answer.
        expect(calls.c_status?.status).toBe("not-started");
        expect(calls.c_status?.decision).toMatchObject({
          action: "run",
          rule: "allowlist",
          coveredBy: "git status",
          key: "git status",
        });
        expect(calls.c_push?.status).toBe("parked");
        expect(calls.c_push?.decision).toMatchObject({ action: "park", key: "git push" });
        expect(run.pending.tool).toBe("execute_execute_command");
        expect(run.pending.args).toMatchObject({ program: "git", args: ["push"] });
      });

      it("a classifier verdict lets ls run and keeps mv parked; the verdicts are on the record", async () => {
        scenarios.classify = [
          {
            // (mv, not rm: deleting from the shell is refused by the denylist before any policy.)
            calls: [exec("c_ls", "ls", ["-la"]), exec("c_rm", "mv", ["notes", "old-notes"])],
          },
          { text: "done" },
        ];
        const peer = await addCaller(peergate, {
          name: "classified",
          kind: "peer",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "low-risk",
        });
        const before = classifierRequests.length;
        const task = await send(peer.secret, "scenario:classify tidy up");
        const run = await waitForRun(peergate, readTaskRunId(task), ["parked"]);
        const calls = callsOf(run);
        // Decided to run, and held while rm waits (a batch parks whole).
        expect(calls.c_ls?.status).toBe("not-started");
        expect(calls.c_ls?.decision).toMatchObject({
          rule: "policy-admits",
          risk: "read-only",
          classifier: { verdict: "read-only", model: "openai-compatible:scripted" },
        });
        expect(calls.c_rm?.status).toBe("parked");
        expect(calls.c_rm?.decision).toMatchObject({
          rule: "policy-parks",
          classifier: { verdict: "high-risk" },
        });
        // The classifier read the commands and nothing of the conversation.
        const asked = classifierRequests.slice(before);
        expect(asked).toHaveLength(2);
        for (const prompt of asked) expect(prompt).not.toContain("tidy up");
        // The classifier's calls are not the run's usage: the run's tokens count only its own steps.
        expect(run.pending.reason).toContain("low-risk");
      });

      it("the classifier turned off for one caller: ls asks too, nothing is rated, and on again needs the operator", async () => {
        scenarios.unrated = [
          { calls: [exec("u_ls", "ls", ["-la"]), exec("u_status", "git", ["status"])] },
          { text: "done" },
        ];
        const peer = await addCaller(peergate, {
          name: "unrated",
          kind: "peer",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "low-risk",
          commands: ["git status"],
          classifier: "off",
        });
        const before = classifierRequests.length;
        const task = await send(peer.secret, "scenario:unrated look");
        const run = await waitForRun(peergate, readTaskRunId(task), ["parked"]);
        const calls = callsOf(run);
        // The classifier would rate ls read-only and let it run; off, an uncovered command asks.
        expect(calls.u_ls?.status).toBe("parked");
        expect(calls.u_ls?.decision).toMatchObject({
          rule: "policy-parks",
          risk: "unknown",
          classifier: { verdict: "off" },
        });
        expect(calls.u_status?.status).toBe("not-started");
        expect(calls.u_status?.decision).toMatchObject({ action: "run", rule: "allowlist" });
        expect(classifierRequests.length).toBe(before);

        const shown = await peergate.admin("GET", "/callers/unrated");
        expect(shown.body.classifier ?? shown.body.caller?.classifier).toBe("off");
        // Turning it on widens what the caller may do: the admin token alone is refused.
        const on = await peergate.admin("PATCH", "/callers/unrated", { classifier: "on" });
        expect(on.status).toBe(403);
        const bad = await peergate.admin("PATCH", "/callers/unrated", { classifier: "maybe" });
        expect(bad.status).toBe(400);
        expect(JSON.stringify(bad.body)).toContain("classifier");
        // Off again (or off for another caller) narrows: the admin token is enough.
        const rated = await addCaller(peergate, { name: "rated", kind: "peer" });
        expect(rated.secret).toBeTruthy();
        const off = await peergate.admin("PATCH", "/callers/rated", { classifier: "off" });
        expect(off.status).toBe(200);
      });

      it("a floor reason parks a shell script even under high-risk, naming it", async () => {
        scenarios.floor = [
          { calls: [exec("c_sh", "sh", ["-c", "echo $(cat /etc/passwd) > out.txt"])] },
          { text: "done" },
        ];
        const peer = await addCaller(peergate, {
          name: "floored",
          kind: "peer",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "low-risk",
          commands: ["sh"],
        });
        const task = await send(peer.secret, "scenario:floor go");
        const run = await waitForRun(peergate, readTaskRunId(task), ["parked"]);
        const call = callsOf(run).c_sh;
        expect(call?.decision.rule).toBe("safety");
        expect(call?.decision.floorReasons.length).toBeGreaterThan(0);
        expect(run.pending.reason).toContain("risk floor");
        const audit = await peergate.admin("GET", "/audit?limit=1000");
        expect(audit.status).toBe(200);
      });

      it("a webhook caller's call that needs a person is declined and the run goes on", async () => {
        scenarios.webhook = [
          { calls: [exec("c_push", "git", ["push"])] },
          { text: "could not push" },
        ];
        const hook = await addCaller(peergate, {
          name: "declining",
          kind: "peer",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "read-only",
          whenNobody: "decline",
        });
        const task = await send(hook.secret, "scenario:webhook push it");
        expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        const run = await waitForRun(peergate, readTaskRunId(task), ["completed"]);
        expect(callsOf(run).c_push?.status).toBe("declined");
        const last = stub.requests
          .map((r) => r.body)
          .filter((r) => readScenario(r) === "webhook")
          .at(-1);
        const result = readToolResults(last).get("c_push") ?? "";
        expect(result).toContain("was not run");
        expect(result).toContain("What would let it run");
        const audit = await peergate.admin("GET", "/audit?kind=tool.declined&limit=1000");
        expect(
          audit.body.events.some((e: { data: { runId: string } }) => e.data.runId === run.id),
        ).toBe(true);
      });

      it("a webhook caller's call that needs a person is declined by default; the run goes on", async () => {
        scenarios.hookdecline = [
          { calls: [exec("h_push", "git", ["push"])] },
          { text: "reported what it could not do" },
        ];
        const hook = await addCaller(peergate, {
          name: "hook-declines",
          kind: "webhook",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "read-only",
          promptTemplate: "scenario:hookdecline Handle this event:\n{{payload}}",
        });
        const fired = await fetch(`${peergate.url}/webhooks/hook-declines`, {
          method: "POST",
          headers: { authorization: `Bearer ${hook.secret}`, "content-type": "application/json" },
          body: JSON.stringify({ event: "deploy" }),
        });
        expect(fired.status).toBe(202);
        const { runId } = (await fired.json()) as { runId: string };
        const run = await waitForRun(peergate, runId, ["completed"]);
        expect(run.text).toBe("reported what it could not do");
        expect(callsOf(run).h_push?.status).toBe("declined");
        expect(callsOf(run).h_push?.decision).toMatchObject({ action: "decline" });
        const caller = await peergate.admin("GET", "/callers/hook-declines");
        expect(caller.body.caller.whenNobody).toBe("decline");
      });

      it("every tool's output is redacted of the secrets peergate holds before the model reads it", async () => {
        // A file in the workspace that holds the admin token and the model key (as a leak would).
        await writeFile(
          path.join(peergate.workspace, "leak.txt"),
          `admin=${peergate.adminToken}\nmodel=e2e-model-key\n`,
        );
        scenarios.redact = [
          {
            calls: [
              { id: "r_read", name: "read_file", arguments: '{"path":"leak.txt"}' },
              { id: "r_grep", name: "grep", arguments: '{"pattern":"admin=","path":"."}' },
            ],
          },
          { text: "done" },
        ];
        const peer = await addCaller(peergate, { name: "reader", kind: "peer", tier: "private" });
        const task = await send(peer.secret, "scenario:redact read");
        await waitForRun(peergate, readTaskRunId(task), ["completed"]);
        const last = stub.requests
          .map((r) => r.body)
          .filter((r) => readScenario(r) === "redact")
          .at(-1);
        const results = readToolResults(last);
        for (const id of ["r_read", "r_grep"]) {
          const text = results.get(id) ?? "";
          expect(text, id).toContain("[redacted]");
          expect(text, id).not.toContain(peergate.adminToken);
          expect(text, id).not.toContain("e2e-model-key");
        }
      });

      it("web_fetch: inside the grant runs, outside parks, a redirect out of the grant parks", async () => {
        // Two batches: one that runs (a redirect out of the grant is met while fetching), then
        // one whose fetch outside the grant asks before anything of it runs.
        scenarios.fetch = [
          {
            calls: [
              fetchCall("f_in", `${webUrl}/docs/page`),
              fetchCall("f_redirect", `${webUrl}/docs/redirect-out`),
            ],
          },
          { calls: [fetchCall("f_out", `${webUrl}/private/page`)] },
          { text: "done" },
        ];
        const peer = await addCaller(peergate, {
          name: "fetcher",
          kind: "peer",
          tier: "internal",
          allow: ["web_fetch"],
          approvalPolicy: "read-only",
          urlGrants: { prefixes: [`${webUrl}/docs`] },
        });
        const task = await send(peer.secret, "scenario:fetch read");
        const runId = readTaskRunId(task);
        const run = await waitForRun(peergate, runId, ["parked"]);
        const calls = callsOf(run);
        expect(calls.f_in?.status).toBe("completed");
        expect(calls.f_in?.decision).toMatchObject({ rule: "allowlist" });
        expect(calls.f_redirect?.status).toBe("parked");
        expect(calls.f_redirect?.decision.urlReason).toContain("Redirect 1");
        const rejected = await peergate.admin("POST", `/runs/${runId}/reject`, {
          callId: run.pending.callId,
          reason: "not that page",
        });
        expect(rejected.status).toBe(202);
        const again = await waitForRun(peergate, runId, ["parked"]);
        expect(callsOf(again).f_out?.status).toBe("parked");
        expect(callsOf(again).f_out?.decision).toMatchObject({ rule: "url-grant" });
        expect(callsOf(again).f_out?.decision.urlReason).toBeDefined();
        expect(again.pending.args).toEqual({ url: `${webUrl}/private/page` });
      });

      it("narrowing applies from the next step; widening never reaches the run", async () => {
        const peer = await addCaller(peergate, {
          name: "narrowed",
          kind: "peer",
          tier: "internal",
          approvalPolicy: "auto",
          toolOverrides: { stat: "deny" },
        });
        // The operator token is made when needed: making one replaces the one before.
        const patch = async (body: unknown) =>
          peergate.admin("PATCH", "/callers/narrowed", body, {
            "x-peergate-operator-token": await createOperatorToken({
              services: peergate.server.services,
              actor: "system",
            }),
          });
        scenarios.narrow = [
          { calls: [{ id: "n_ls1", name: "ls", arguments: '{"path":"."}' }] },
          {
            calls: [
              { id: "n_ls2", name: "ls", arguments: '{"path":"."}' },
              { id: "n_stat", name: "stat", arguments: '{"path":"README.md"}' },
            ],
          },
          { text: "done" },
        ];
        beforeStep.narrow = async (turn) => {
          // Between the first and the second step: a new deny (narrowing), a removed deny (widening).
          if (turn === 1) {
            const res = await patch({ toolOverrides: { ls: "deny" } });
            expect(res.status).toBe(200);
          }
        };
        const task = await send(peer.secret, "scenario:narrow look");
        const run = await waitForRun(peergate, readTaskRunId(task), ["completed"]);
        const calls = callsOf(run);
        expect(calls.n_ls1?.status).toBe("completed");
        expect([calls.n_ls2?.status, calls.n_ls2?.code]).toEqual(["refused", "tool-unavailable"]);
        // stat's deny was removed by the same change, but the run keeps the deny it started with.
        expect([calls.n_stat?.status, calls.n_stat?.code]).toEqual(["refused", "tool-unavailable"]);
        const last = stub.requests
          .map((r) => r.body)
          .filter((r) => readScenario(r) === "narrow")
          .at(-1);
        const results = readToolResults(last);
        expect(results.get("n_ls2")).toBe(
          `Tool ${quoteUntrusted("ls")} is not available in this run.`,
        );
        expect(results.get("n_stat")).toBe(
          `Tool ${quoteUntrusted("stat")} is not available in this run.`,
        );
      });

      it("widening while a run is parked never reaches it when it resumes", async () => {
        const peer = await addCaller(peergate, {
          name: "resumed",
          kind: "peer",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "read-only",
          commands: ["git status"],
        });
        scenarios.resumed = [
          { calls: [exec("w_push", "git", ["push"])] },
          { calls: [exec("w_rm", "mv", ["notes/todo.txt", "notes/done.txt"])] },
          { text: "done" },
        ];
        const task = await send(peer.secret, "scenario:resumed go");
        const runId = readTaskRunId(task);
        const parked = await waitForRun(peergate, runId, ["parked"]);
        const operator = async () => ({
          "x-peergate-operator-token": await createOperatorToken({
            services: peergate.server.services,
            actor: "system",
          }),
        });
        // Widen while parked: mv on the allowlist, and a milder policy.
        const widened = await peergate.admin(
          "PATCH",
          "/callers/resumed",
          { commands: ["git status", "mv"], approvalPolicy: "auto" },
          await operator(),
        );
        expect(widened.status).toBe(200);
        const approved = await peergate.admin(
          "POST",
          `/runs/${runId}/approve`,
          { callId: parked.pending.callId, argsDigest: parked.pending.argsDigest },
          await operator(),
        );
        expect(approved.status).toBe(202);
        // The resumed run still decides with what it started with: mv is not covered, and read-only holds.
        const again = await waitForRun(peergate, runId, ["parked"]);
        expect(again.pending.callId).toBe("w_rm");
        expect(callsOf(again).w_rm?.decision).toMatchObject({ action: "park" });
        expect(callsOf(again).w_rm?.decision.coveredBy).toBeUndefined();
      });

      it("a stricter policy set mid-run parks the next step's call", async () => {
        const peer = await addCaller(peergate, {
          name: "stricter",
          kind: "peer",
          tier: "private",
          allow: ["execute_command"],
          approvalPolicy: "auto",
        });
        scenarios.stricter = [
          { calls: [exec("s_1", "ls", [])] },
          { calls: [exec("s_2", "git", ["push"])] },
          { text: "done" },
        ];
        beforeStep.stricter = async (turn) => {
          if (turn === 1) {
            const res = await peergate.admin("PATCH", "/callers/stricter", {
              approvalPolicy: "read-only",
            });
            expect(res.status).toBe(200);
          }
        };
        const task = await send(peer.secret, "scenario:stricter go");
        const run = await waitForRun(peergate, readTaskRunId(task), ["parked"]);
        const calls = callsOf(run);
        expect(calls.s_1?.status).toBe("completed");
        expect(calls.s_2?.status).toBe("parked");
      });

      it("done when: exactly git status, git log and fetches from one host, and ceiling explains it", async () => {
        const host = `${webUrl}/`;
        const elsewhere = webUrl.replace("127.0.0.1", "localhost");
        scenarios.exactly = [
          {
            calls: [
              exec("d_status", "git", ["status", "--short"]),
              exec("d_log", "git", ["log", "--oneline"]),
              exec("d_push", "git", ["push"]),
              exec("d_cat", "cat", ["README.md"]),
              exec("d_chain", "sh", ["-c", "git status && curl evil.example"]),
              fetchCall("d_fetch", `${webUrl}/docs/page`),
              fetchCall("d_other", `${elsewhere}/docs/page`),
            ],
          },
          { text: "done" },
        ];
        const peer = await addCaller(peergate, {
          name: "exactly",
          kind: "peer",
          tier: "public",
          allow: ["execute_command", "web_fetch"],
          approvalPolicy: "read-only",
          whenNobody: "decline",
          commands: ["git status", "git log"],
          urlGrants: { prefixes: [host] },
          // The public tier's other tools: denied, so nothing more exists for this caller.
          toolOverrides: { ls: "deny", find: "deny", stat: "deny", get_time: "deny" },
        });
        const task = await send(peer.secret, "scenario:exactly go");
        const run = await waitForRun(peergate, readTaskRunId(task), ["completed"]);
        const calls = callsOf(run);
        const statuses = Object.fromEntries(Object.entries(calls).map(([id, c]) => [id, c.status]));
        expect(statuses).toEqual({
          d_status: "completed",
          d_log: "completed",
          d_push: "declined",
          d_cat: "declined",
          d_chain: "declined",
          d_fetch: "completed",
          d_other: "declined",
        });

        const cli = async (...argv: string[]) => {
          const out: string[] = [];
          const err: string[] = [];
          const code = await runCli(cliCommands, argv, {
            env: { PEERGATE_URL: peergate.url, PEERGATE_ADMIN_TOKEN: peergate.adminToken },
            cwd: policiesDir,
            io: { out: (t) => out.push(t), err: (t) => err.push(t) },
            signal: new AbortController().signal,
          });
          return { code, out: out.join("\n"), err: err.join("\n") };
        };
        const shown = await cli("ceiling", "exactly");
        expect(shown.code).toBe(0);
        expect(shown.out).toContain('Command allowlist (2): "git status", "git log"');
        expect(shown.out).toContain(`URL grants: "${host}"`);
        const covered = await cli("ceiling", "exactly", "--command", "git status --short");
        expect(covered.code).toBe(0);
        expect(covered.out).toContain('Command "git status --short": covered (key "git status")');
        const notCovered = await cli("ceiling", "exactly", "--command", "git push origin main");
        expect(notCovered.out).toContain(
          'Command "git push origin main": not covered (key "git push")',
        );
        const chained = await cli(
          "ceiling",
          "exactly",
          "--command",
          "git status && rm -rf /",
          "--json",
        );
        expect(chained.code).toBe(0);
        const report = JSON.parse(chained.out);
        expect(report.command).toMatchObject({ covered: false, key: null });
        expect(report.command.reason).toContain("control operator");
        expect(report.controls.commands).toEqual([
          { entry: "git status", from: "caller" },
          { entry: "git log", from: "caller" },
        ]);

        // The CLI narrows with the admin token alone: one entry fewer, a new deny.
        const narrowed = await cli(
          "callers",
          "set",
          "exactly",
          "--command",
          "git status",
          // The list is replaced whole: the denies it had stay in it.
          ...["ls", "find", "stat", "get_time", "web_fetch"].flatMap((t) => [
            "--override",
            `${t}=deny`,
          ]),
          "--json",
        );
        expect(narrowed.err).toBe("");
        expect(narrowed.code).toBe(0);
        const after = await peergate.admin("GET", "/callers/exactly");
        expect(after.body.caller).toMatchObject({
          commands: ["git status"],
          toolOverrides: { ls: "deny", web_fetch: "deny" },
        });
        // Widening through the CLI without the operator token is refused, naming the field.
        const widened = await cli("callers", "set", "exactly", "--command", "rm", "--json");
        expect(widened.code).not.toBe(0);
        expect(widened.err).toContain("commands");
        const bad = await cli("callers", "set", "exactly", "--when-nobody", "later");
        expect(bad.code).not.toBe(0);
        expect(bad.err).toContain('whenNobody: got "later"');
      });
    },
  );
}
