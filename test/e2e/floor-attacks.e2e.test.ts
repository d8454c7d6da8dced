// The floor attacked through the real server, with a classifier that answers `read-only` to
// every command: the case the floor exists for ("no verdict is allowed to lower them"). Each call
// hides shell code where the floor did not look before — behind a shell option that takes a
// value, attached to an interpreter's flag, inside find -exec, flock -c, script -c, eval, an
// arithmetic context — and would leave a marker file if it ran. Under a `read-only` policy that
// declines when nobody is there, every one is declined, naming the floor's reason, and no marker
// appears; a plain `ls` still runs on the stub's verdict. Under `auto`, deleting from the shell
// is refused by the denylist, and the files stay.
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

const scenarios: Record<string, StubStep[]> = {};
let classified = 0;
const stub = createOpenAiStub();
let modelBaseUrl: string;
let policiesDir: string;
let peergate: Peergate;

function isClassifierRequest(request: ChatRequest): boolean {
  return request.messages.some(
    (m) =>
      m.role === "system" && readContent(m).startsWith("You rate the risk of one shell command"),
  );
}

beforeAll(async () => {
  stub.respondWith(async (request) => {
    if (isClassifierRequest(request)) {
      classified++;
      return { text: "read-only" }; // whatever the command
    }
    const steps = scenarios[readScenario(request) ?? ""];
    if (!steps) return { text: "no script for this conversation" };
    const turn = request.messages.filter((m) => m.role === "assistant").length;
    return steps[Math.min(turn, steps.length - 1)] as StubStep;
  });
  modelBaseUrl = await stub.listen();
  policiesDir = await copyPolicies();
  const agentFile = path.join(policiesDir, "agent.yaml");
  const text = await readFile(agentFile, "utf8");
  await writeFile(agentFile, text.replace(/^tools: .*$/m, "tools: [files, context, shell]"));
  peergate = await startPeergateOn("pglite", { policiesDir, modelBaseUrl });
}, 240_000);

afterAll(async () => {
  await peergate?.stop();
  await stub.close();
  await removeTempDirs();
}, 120_000);

async function send(secret: string, text: string) {
  const client = await peergate.client(secret);
  return asTask(await client.sendMessage({ message: userMessage(text) } as never));
}

const callsOf = (run: { toolCalls: { callId: string; status: string; decision: any }[] }) =>
  Object.fromEntries(run.toolCalls.map((c) => [c.callId, c]));

/** Each form writes pwned-<id> into the workspace if it runs. */
const forms: [string, string, string[]][] = [
  ["rcfile", "bash", ["--rcfile", "/dev/null", "-c", "echo $(touch pwned-rcfile)"]],
  [
    "initfile",
    "bash",
    ["--init-file", "/dev/null", "-c", "touch pwned-initfile > /dev/null; echo $(id)"],
  ],
  ["attached", "python3", ["-cimport pathlib; pathlib.Path('pwned-attached').touch()"]],
  [
    "findexec",
    "find",
    [".", "-maxdepth", "0", "-exec", "sh", "-c", "echo $(touch pwned-findexec)", ";"],
  ],
  ["flock", "flock", ["lockfile", "-c", "echo $(touch pwned-flock)"]],
  ["script", "script", ["-qc", "echo $(touch pwned-script)", "/dev/null"]],
  ["eval", "sh", ["-c", "eval 'touch pwned-eval > /dev/null; echo $(id)'"]],
  ["arith", "bash", ["-c", "x='a[$(touch pwned-arith)]'; echo $((x))"]],
];

describe("the floor through the real server, with a classifier that says read-only to all", () => {
  it("declines every hidden-code form under read-only, naming the floor, and none runs", async () => {
    scenarios.hidden = [
      { calls: [exec("plain", "ls", ["-la"]), ...forms.map(([id, p, a]) => exec(id, p, a))] },
      { text: "done" },
    ];
    const peer = await addCaller(peergate, {
      name: "hider",
      kind: "peer",
      tier: "private",
      allow: ["execute_command"],
      approvalPolicy: "read-only",
      whenNobody: "decline",
    });
    const task = await send(peer.secret, "scenario:hidden look around");
    const run = await waitForRun(peergate, readTaskRunId(task), ["completed"], 180_000);
    const calls = callsOf(run);
    // The stub's verdict is what lets a plain command run: it is read-only to everything.
    expect(calls.plain?.status).toBe("completed");
    expect(calls.plain?.decision).toMatchObject({ classifier: { verdict: "read-only" } });
    expect(classified).toBeGreaterThan(0);
    for (const [id] of forms) {
      expect(calls[id]?.status, id).toBe("declined");
      expect(calls[id]?.decision?.floorReasons?.length, id).toBeGreaterThan(0);
    }
    const left = await readdir(peergate.workspace);
    expect(left.filter((f) => f.startsWith("pwned-"))).toEqual([]);
  }, 240_000);

  it("refuses deletion from the shell under auto; the mktemp clean-up runs", async () => {
    await mkdir(path.join(peergate.workspace, "build"), { recursive: true });
    await writeFile(path.join(peergate.workspace, "build", "keep.txt"), "keep\n");
    scenarios.deleting = [
      {
        calls: [
          exec("rm", "rm", ["-rf", "build"]),
          exec("find", "find", ["build", "-delete"]),
          exec("mixed", "sh", ["-c", 'tmp=$(mktemp -d); rm -rf "$tmp" build']),
          exec("tidy", "sh", ["-c", 'tmp=$(mktemp -d); touch "$tmp/x"; rm -rf "$tmp"']),
        ],
      },
      { text: "done" },
    ];
    const peer = await addCaller(peergate, {
      name: "deleter",
      kind: "peer",
      tier: "private",
      allow: ["execute_command"],
      approvalPolicy: "auto",
    });
    const task = await send(peer.secret, "scenario:deleting clean up");
    const run = await waitForRun(peergate, readTaskRunId(task), ["completed"], 180_000);
    const calls = callsOf(run);
    for (const id of ["rm", "find", "mixed"]) {
      expect(calls[id]?.status, id).not.toBe("completed");
    }
    expect(calls.tidy?.status).toBe("completed");
    expect(existsSync(path.join(peergate.workspace, "build", "keep.txt"))).toBe(true);
  }, 240_000);
});
