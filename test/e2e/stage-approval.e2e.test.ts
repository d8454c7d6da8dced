// Per-stage approval of a declared chain tool (issue 13), through the real server with a scripted
// model: a stage outside the caller's command allowlist parks the run on that stage alone; once
// approved the chain carries on from there (what ran before is not run again); a second uncovered
// stage parks again; a rejected stage stops the chain there and the run goes on; a branch not
// taken asks nothing; every stage leaves its own audit events.

import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import { postgresSkipReason } from "../support/databases.ts";
import { eventually } from "../support/eventually.ts";
import { createOpenAiStub, readScenario, type StubStep } from "../support/openai-stub.ts";
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

const scenarios: Record<string, StubStep[]> = {};
const stub = createOpenAiStub();
let modelBaseUrl: string;
let policiesDir: string;
let bin: string;

const chainCall = (id: string, command: string) => ({
  id,
  name: "chain",
  arguments: JSON.stringify({ command }),
});

beforeAll(async () => {
  stub.respondWith(async (request) => {
    const steps = scenarios[readScenario(request) ?? ""];
    if (!steps) return { text: "no script for this conversation" };
    const turn = request.messages.filter((m) => m.role === "assistant").length;
    return steps[Math.min(turn, steps.length - 1)] as StubStep;
  });
  modelBaseUrl = await stub.listen();
  policiesDir = await copyPolicies();
  bin = path.join(policiesDir, "bin");
  await mkdir(bin);
  // `count` appends a line (a covered stage that ran twice would show it); `mark` makes a file.
  await writeFile(path.join(bin, "count"), `#!/bin/sh\necho ran >> "$1"\necho counted "$1"\n`);
  await writeFile(path.join(bin, "mark"), `#!/bin/sh\n: > "$1"\necho marked "$1"\n`);
  for (const name of ["count", "mark"]) await chmod(path.join(bin, name), 0o755);
  const agentFile = path.join(policiesDir, "agent.yaml");
  const text = await readFile(agentFile, "utf8");
  await writeFile(agentFile, text.replace(/^tools: .*$/m, "tools: [files, context, custom]"));
  await writeFile(
    path.join(policiesDir, "tools.yaml"),
    [
      "commands:",
      "  - name: chain",
      "    description: Run a chain of plain commands.",
      "    mode: chain",
      '    programs: [count, mark, "false"]',
      "    result: structured",
      "    risk: high-risk",
      "    disclosure: public",
      "    egress: false",
      "  - name: upper",
      "    description: Upper-case the text given on stdin.",
      "    mode: fixed",
      "    program: tr",
      "    args: [a-z, A-Z]",
      "    arguments: {mode: none}",
      "    stdin: required",
      "    maxStdinBytes: 1024",
      "    risk: high-risk",
      "    disclosure: public",
      "    egress: false",
    ].join("\n"),
  );
});
afterAll(async () => {
  await stub.close();
  await removeTempDirs();
});

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `per-stage approval through the real server [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;
      let secret: string;

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, {
          policiesDir,
          modelBaseUrl,
          env: { PATH: `${bin}:/usr/bin:/bin` },
        });
        ({ secret } = await addCaller(peergate, {
          name: "stager",
          kind: "peer",
          tier: "private",
          allow: ["chain", "upper"],
          approvalPolicy: "read-only",
          commands: ["count", "false"],
        }));
      });
      afterAll(async () => peergate?.stop());

      const operator = async () => ({
        "x-peergate-operator-token": await createOperatorToken({
          services: peergate.server.services,
          actor: "system",
        }),
      });
      async function start(scenario: string): Promise<string> {
        const client = await peergate.client(secret);
        const task = asTask(
          await client.sendMessage({ message: userMessage(`scenario:${scenario} go`) } as never),
        );
        return readTaskRunId(task);
      }
      async function answer(runId: string, pending: any, verb: "approve" | "reject") {
        const res = await peergate.admin(
          "POST",
          `/runs/${runId}/${verb}`,
          verb === "approve"
            ? { callId: pending.callId, argsDigest: pending.argsDigest }
            : { callId: pending.callId, reason: "not this stage" },
          await operator(),
        );
        expect(res.status).toBe(202);
      }
      const lines = async (file: string) =>
        (await readFile(path.join(peergate.workspace, file), "utf8")).split("\n").filter(Boolean);
      const lastResult = (scenario: string, id: string) =>
        readToolResults(
          stub.requests
            .map((r) => r.body)
            .filter((r) => readScenario(r) === scenario)
            .at(-1),
        ).get(id);

      it("parks on the uncovered stage alone; approved, the chain carries on without re-running", async () => {
        scenarios[`ok-${kind}`] = [
          { calls: [chainCall("s_ok", "count c1.txt && mark one && count c1.txt")] },
          { text: "done" },
        ];
        const runId = await start(`ok-${kind}`);
        const parked = await waitForRun(peergate, runId, ["parked"]);
        expect(parked.pending.stage).toMatchObject({ argv: ["mark", "one"], approved: [] });
        expect(parked.pending.stage.executable).toBe(path.join(bin, "mark"));
        expect(parked.pending.stage.fingerprint).toMatch(/^[0-9a-f]{64}$/);
        expect(parked.pending.summary).toContain("this stage only");
        // The covered stage before it ran; the uncovered one did not.
        expect(await lines("c1.txt")).toEqual(["ran"]);
        expect(existsSync(path.join(peergate.workspace, "one"))).toBe(false);

        await answer(runId, parked.pending, "approve");
        const done = await waitForRun(peergate, runId, ["completed"]);
        expect(done.toolCalls.find((c: any) => c.callId === "s_ok")).toMatchObject({
          status: "completed",
          decision: { action: "run", rule: "stages" },
        });
        expect(existsSync(path.join(peergate.workspace, "one"))).toBe(true);
        // The first stage ran once, before the park; the last once, after it.
        expect(await lines("c1.txt")).toEqual(["ran", "ran"]);
        const result = JSON.parse(lastResult(`ok-${kind}`, "s_ok") ?? "{}");
        expect(result.stdout).toBe("counted c1.txt\nmarked one\ncounted c1.txt\n");
        expect(result.commands.map((c: any) => c.status)).toEqual([
          { exited: 0 },
          { exited: 0 },
          { exited: 0 },
        ]);

        // Every stage has its own audit trail, the uncovered one parked then allowed.
        const audit = await peergate.admin("GET", "/audit?kind=tool.stage&limit=1000");
        const mine = audit.body.events
          .map((e: any) => e.data)
          .filter((d: any) => d.runId === runId)
          .map((d: any) => `${d.program} ${d.arguments.join(" ")}: ${d.event}`);
        expect(mine).toEqual([
          "count c1.txt: allowed",
          "count c1.txt: started",
          "count c1.txt: exited",
          "mark one: parked",
          "mark one: allowed",
          "mark one: started",
          "mark one: exited",
          "count c1.txt: allowed",
          "count c1.txt: started",
          "count c1.txt: exited",
        ]);
        const parkedEvent = audit.body.events.find(
          (e: any) => e.data.runId === runId && e.data.event === "parked",
        );
        expect(parkedEvent.data.reason).toContain("mark");
      });

      it("an approval for one stage does not run another: the next uncovered stage parks again", async () => {
        scenarios[`two-${kind}`] = [
          { calls: [chainCall("s_two", "mark three && mark four")] },
          { text: "done" },
        ];
        const runId = await start(`two-${kind}`);
        const first = await waitForRun(peergate, runId, ["parked"]);
        expect(first.pending.stage.argv).toEqual(["mark", "three"]);
        await answer(runId, first.pending, "approve");
        const second = await eventually("the run parked on the second stage", async () => {
          const got = await peergate.admin("GET", `/runs/${runId}`);
          return got.body?.run?.pending?.stage?.argv?.[1] === "four" ? got.body.run : undefined;
        });
        expect(second.pending.stage.argv).toEqual(["mark", "four"]);
        expect(second.pending.stage.approved).toEqual([first.pending.stage.fingerprint]);
        expect(second.pending.argsDigest).not.toBe(first.pending.argsDigest);
        expect(existsSync(path.join(peergate.workspace, "three"))).toBe(true);
        expect(existsSync(path.join(peergate.workspace, "four"))).toBe(false);
        // The first stage's approval does not answer the second.
        const stale = await peergate.admin(
          "POST",
          `/runs/${runId}/approve`,
          { callId: first.pending.callId, argsDigest: first.pending.argsDigest },
          await operator(),
        );
        expect(stale.status).not.toBe(202);

        await answer(runId, second.pending, "reject");
        const done = await waitForRun(peergate, runId, ["completed"]);
        expect(done.toolCalls.find((c: any) => c.callId === "s_two")?.status).toBe("rejected");
        expect(existsSync(path.join(peergate.workspace, "four"))).toBe(false);
        const text = lastResult(`two-${kind}`, "s_two") ?? "";
        expect(text).toContain("marked three");
        expect(text).toContain("mark four");
      });

      it("a rejected stage stops the chain there; nothing after it runs and the run goes on", async () => {
        scenarios[`no-${kind}`] = [
          { calls: [chainCall("s_no", "count c2.txt && mark two; count c3.txt")] },
          { text: "done" },
        ];
        const runId = await start(`no-${kind}`);
        const parked = await waitForRun(peergate, runId, ["parked"]);
        expect(parked.pending.stage.argv).toEqual(["mark", "two"]);
        await answer(runId, parked.pending, "reject");
        const done = await waitForRun(peergate, runId, ["completed"]);
        expect(done.toolCalls.find((c: any) => c.callId === "s_no")?.status).toBe("rejected");
        expect(existsSync(path.join(peergate.workspace, "two"))).toBe(false);
        expect(existsSync(path.join(peergate.workspace, "c3.txt"))).toBe(false);
        expect(await lines("c2.txt")).toEqual(["ran"]);
        const text = lastResult(`no-${kind}`, "s_no") ?? "";
        expect(text).toContain("counted c2.txt");
        expect(text).toContain("rejected");
      });

      it("an approval keeps stdin's length and digest, never its text; approved, the call gets the text", async () => {
        const text = `confidential-stdin-${kind}-7d41`;
        scenarios[`stdin-${kind}`] = [
          { calls: [{ id: "s_in", name: "upper", arguments: JSON.stringify({ stdin: text }) }] },
          { text: "done" },
        ];
        const runId = await start(`stdin-${kind}`);
        const parked = await waitForRun(peergate, runId, ["parked"]);
        const sha256 = createHash("sha256").update(text).digest("hex");
        expect(parked.pending.args.stdin).toEqual({ bytes: text.length, sha256 });
        expect(JSON.stringify(parked.pending)).not.toContain(text);
        expect(JSON.stringify(parked.pendingApproval)).not.toContain(text);
        await answer(runId, parked.pending, "approve");
        await waitForRun(peergate, runId, ["completed"]);
        expect(lastResult(`stdin-${kind}`, "s_in")).toContain(text.toUpperCase());
        const audit = await peergate.admin("GET", "/audit?limit=1000");
        expect(JSON.stringify(audit.body.events)).not.toContain(text);
      });

      it("a branch not taken asks nothing", async () => {
        scenarios[`skip-${kind}`] = [
          { calls: [chainCall("s_skip", "false && mark skipped; count c4.txt")] },
          { text: "done" },
        ];
        const runId = await start(`skip-${kind}`);
        const done = await waitForRun(peergate, runId, ["completed", "parked"]);
        expect(done.status).toBe("completed");
        expect(existsSync(path.join(peergate.workspace, "skipped"))).toBe(false);
        expect(await lines("c4.txt")).toEqual(["ran"]);
      });
    },
  );
}
