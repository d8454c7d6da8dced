// No caller can stall the server (issue 28), through the real server: a caller starts its whole
// concurrency limit of runs at once (30 blocking SendMessages) against an agent offering every
// tool category — files, web, shell, context, a declared command tool and a stdio MCP server —
// while a second caller polls GetTask and a probe polls /healthz, one request at a time each.
//
// What is asserted does not depend on the machine's speed: every run of the burst completes (the
// start queue delays, it never drops), the other caller's GetTask and the health probe are
// answered during the burst, the starts went through the queue (its metrics), and /readyz names
// the event loop. The probes' p99s, idle and during the burst, are printed for the reader; on
// PGlite the /healthz p99 during the burst is held to 100 ms + 4 × its idle p99 in the same run
// (see the assertion for why that bound and not GetTask's).
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TaskState } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresSkipReason } from "../support/databases.ts";
import {
  addCaller,
  asTask,
  copyPolicies,
  type Peergate,
  removeTempDirs,
  type ScriptedModel,
  startPeergateOn,
  startScriptedModel,
  userMessage,
} from "./support.ts";

const burstSize = 30;
const idleSamples = 30;
const mcpFixture = fileURLToPath(new URL("../tools/fixtures/mcp-server.ts", import.meta.url));

let model: ScriptedModel;
let policiesDir: string;

beforeAll(async () => {
  model = await startScriptedModel({ burst: [{ text: "done" }], poll: [{ text: "polled" }] });
  policiesDir = await copyPolicies();
  const agentFile = path.join(policiesDir, "agent.yaml");
  const agent = await readFile(agentFile, "utf8");
  await writeFile(
    agentFile,
    agent.replace(/^tools: .*$/m, "tools: [files, context, web, shell, custom, mcp]"),
  );
  const node = JSON.stringify(process.execPath);
  await writeFile(
    path.join(policiesDir, "tools.yaml"),
    [
      "commands:",
      "  - name: say",
      "    description: Print the given words.",
      "    mode: fixed",
      `    program: ${node}`,
      `    args: ["-e", "process.stdout.write(process.argv.slice(1).join(' '))"]`,
      "    risk: read-only",
      "    disclosure: public",
      "    egress: false",
      "mcpServers:",
      "  - name: fixture",
      "    transport: stdio",
      `    command: ${node}`,
      `    args: [${JSON.stringify(mcpFixture)}]`,
      "    tools:",
      "      echo: {description: Echo text., risk: low-risk, disclosure: public, egress: false}",
    ].join("\n"),
  );
}, 60_000);

afterAll(async () => {
  await model?.close();
  await removeTempDirs();
});

function p99(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] ?? Number.NaN;
}

async function timed(probe: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await probe();
  return performance.now() - started;
}

for (const kind of ["pglite", "postgres"] as const) {
  const skip = kind === "postgres" ? postgresSkipReason() : undefined;
  describe.skipIf(skip !== undefined)(
    `a burst of run starts with the full toolset [${kind}]${skip ? ` — skipped: ${skip}` : ""}`,
    () => {
      let peergate: Peergate;

      beforeAll(async () => {
        peergate = await startPeergateOn(kind, {
          policiesDir,
          modelBaseUrl: model.baseUrl,
          // No tool runs here (the model only answers), so nothing needs confining; said
          // explicitly, as an operator without bubblewrap would.
          env: { PEERGATE_SANDBOX: "none" },
        });
      }, 240_000);
      afterAll(async () => peergate?.stop(), 120_000);

      it("answers another caller's GetTask and /healthz during the burst, and completes every run", {
        timeout: 600_000,
      }, async () => {
        const burst = await addCaller(peergate, {
          name: "burst",
          kind: "peer",
          tier: "private",
          allow: [
            "execute_command",
            "write_file",
            "edit_file",
            "make_directory",
            "web_fetch",
            "say",
            "fixture.echo",
          ],
          budgets: {
            concurrentRuns: burstSize,
            daily: { runs: 10_000, tokens: 10_000_000_000, costUsd: 1_000 },
          },
        });
        const poller = await addCaller(peergate, { name: "poller", kind: "peer", tier: "public" });
        const burstClient = await peergate.client(burst.secret);
        const pollClient = await peergate.client(poller.secret);
        const polled = asTask(
          await pollClient.sendMessage({ message: userMessage("scenario:poll") } as never),
        );
        const probes = {
          health: async () => {
            const response = await fetch(`${peergate.url}/healthz`);
            expect(response.status).toBe(200);
            await response.text();
          },
          getTask: async () => {
            const task = await pollClient.getTask({ id: polled.id } as never);
            expect(task.id).toBe(polled.id);
          },
        };
        // Warm-up: the first run of a caller compiles what later ones reuse.
        await burstClient.sendMessage({ message: userMessage("scenario:burst warm") } as never);

        const idle = { health: [] as number[], getTask: [] as number[] };
        for (let i = 0; i < idleSamples; i++) {
          idle.health.push(await timed(probes.health));
          idle.getTask.push(await timed(probes.getTask));
        }

        const during = { health: [] as number[], getTask: [] as number[] };
        let done = false;
        const loop = async (probe: () => Promise<unknown>, out: number[]) => {
          while (!done) out.push(await timed(probe));
        };
        const polling = Promise.all([
          loop(probes.health, during.health),
          loop(probes.getTask, during.getTask),
        ]);
        const tasks = await Promise.all(
          Array.from({ length: burstSize }, (_, i) =>
            burstClient.sendMessage({ message: userMessage(`scenario:burst ${i}`) } as never),
          ),
        );
        done = true;
        await polling;

        // Every run of the burst started and finished: the queue delays, it never drops.
        expect(tasks.map((t) => asTask(t).status?.state)).toEqual(
          Array(burstSize).fill(TaskState.TASK_STATE_COMPLETED),
        );

        const report = {
          idle: { health: p99(idle.health), getTask: p99(idle.getTask) },
          burst: { health: p99(during.health), getTask: p99(during.getTask) },
          samples: { health: during.health.length, getTask: during.getTask.length },
        };
        console.log(`[burst ${kind}] ${JSON.stringify(report)}`);
        expect(report.samples.health).toBeGreaterThan(0);
        expect(report.samples.getTask).toBeGreaterThan(0);
        // On PGlite, /healthz is held to the issue's bound, scaled by the same probe on the idle
        // server in this run so that a loaded machine, which slows both, cannot fail it: with
        // the database in its worker thread the burst's p99 stayed within 100 ms + 1.7 × idle
        // under a load of 15 on two cores, and with PGlite on the server's thread it was
        // 100 ms + 8 to 60 × idle. GetTask is printed, not judged: it waits for the one database
        // session behind the burst's statements (seconds on a loaded machine, on PostgreSQL too),
        // and /healthz on PostgreSQL went to 100 ms + 5 × idle under load.
        if (kind === "pglite") {
          expect(report.burst.health).toBeLessThan(100 + 4 * report.idle.health);
        }

        // What an operator sees: the starts went through the queue, and /readyz names the loop.
        const metrics = await (await fetch(`${peergate.url}/metrics`)).text();
        const waited = /^peergate_run_start_wait_seconds_count (\d+)/m.exec(metrics)?.[1];
        expect(Number(waited)).toBeGreaterThanOrEqual(burstSize);
        expect(metrics).toMatch(/^peergate_event_loop_lag_max_seconds \d/m);
        const ready = (await (await fetch(`${peergate.url}/readyz`)).json()) as {
          checks: unknown[];
        };
        expect(ready.checks).toContainEqual(
          expect.objectContaining({ name: "event-loop", ok: true }),
        );
      });
    },
  );
}
