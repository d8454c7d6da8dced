// A sandboxed command holds its three standard streams and nothing else of the host: no
// descriptor the server holds or inherited, and not the pipe bwrap reports the sandbox's PID 1
// on. The real server (`peergate serve`, a child process) is started the way a supervisor might
// start it, with a descriptor of its own left open across exec (fd 100, a file of the host's,
// open for writing): a declared command tool lists the descriptors its shell holds, from inside
// the sandbox, and tries to write through fd 100 (`ls` and a write, in bash: dash knows only
// descriptors 0 to 9); a stdio MCP server (fixtures/bare-mcp-server.mjs) looks for fd 100 and
// for the test runner's own fd 251 in its /proc/self/fd.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { setAgentTools } from "../e2e/support.ts";
import {
  a2a,
  copyPolicies,
  createSharedSecrets,
  instanceEnv,
  readScenario,
  type ScriptedModel,
  type ServeProcess,
  sendMessageBody,
  spawnServe,
  startScriptedModel,
} from "../faults/support.ts";
import { eventually } from "../support/eventually.ts";
import { readContent } from "../support/openai-stub.ts";
import { createOperatorTokenOf, describeWithBwrap, makeSandboxWorkspace } from "./support.ts";

const fixture = fileURLToPath(new URL("./fixtures/bare-mcp-server.mjs", import.meta.url));
const inherited = ["/proc/self/fd/100", "/proc/self/fd/251"];

describeWithBwrap("the descriptors a sandboxed command holds (the real server)", () => {
  let model: ScriptedModel;
  let policiesDir: string;
  let dataDir: string;
  let workspace: string;
  let hostDir: string;
  let hostFile: string;
  let server: ServeProcess | undefined;
  const report = `fds-${process.pid}-${Date.now()}.txt`;

  beforeAll(async () => {
    model = await startScriptedModel({
      fds: [{ calls: [{ id: "call_fds", name: "fds", arguments: "{}" }] }, { text: "done" }],
      probe: [
        {
          calls: [
            {
              id: "call_probe",
              name: "bare_probe",
              arguments: JSON.stringify({ paths: inherited }),
            },
          ],
        },
        { text: "done" },
      ],
    });
    workspace = await makeSandboxWorkspace("peergate-fds-ws-");
    hostDir = await mkdtemp(path.join(os.tmpdir(), "peergate-fds-host-"));
    hostFile = path.join(hostDir, "held-by-the-supervisor");
    await writeFile(hostFile, "");
    policiesDir = await copyPolicies();
    // `ls` lists the shell's descriptors (its own are the shell's, plus the redirection), and
    // the shell then writes to fd 100, which only an inherited descriptor would make work.
    const script = `ls -l /proc/$$/fd > ${path.join(workspace, report)} 2>&1; echo escaped >&100`;
    await writeFile(
      path.join(policiesDir, "tools.yaml"),
      `commands:\n  - {name: fds, description: List descriptors., mode: fixed, program: /bin/bash, args: ["-c", ${JSON.stringify(script)}], risk: read-only, disclosure: public, egress: false}\nmcpServers:\n  - name: bare\n    transport: stdio\n    command: /usr/bin/node\n    args: [${JSON.stringify(fixture)}]\n    tools:\n      probe: {description: Probe., risk: read-only, disclosure: public, egress: false}\n`,
    );
    await setAgentTools(policiesDir, ["files", "context", "custom", "mcp"]);
    dataDir = await mkdtemp(path.join(os.tmpdir(), "peergate-fds-data-"));
  });

  afterAll(async () => {
    await server?.stop();
    await model?.close();
    for (const dir of [dataDir, workspace, policiesDir, hostDir]) {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  });

  it("holds only 0, 1 and 2, though the server inherited another", {
    timeout: 300_000,
  }, async () => {
    const secrets = createSharedSecrets();
    const env = {
      ...instanceEnv({ dataDir, policiesDir, modelBaseUrl: model.baseUrl, workspace, ...secrets }),
      PEERGATE_SANDBOX: "bwrap",
    };
    // The supervisor's shell opens fd 100 (no close-on-exec: a shell's redirections never set
    // it) and execs the server with it.
    server = await spawnServe(env, secrets.adminToken, {
      readyMs: 180_000,
      wrap: (argv) => ["/bin/bash", "-c", `exec "$@" 100>>${hostFile}`, "bash", ...argv],
    });
    const operatorToken = await createOperatorTokenOf(dataDir);
    const created = await server.admin(
      "POST",
      "/callers",
      { name: "lister", kind: "peer", tier: "public", allow: ["fds", "bare.probe"] },
      { "x-peergate-operator-token": operatorToken },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const sent = await a2a(
      server.url,
      created.body.credential.secret,
      sendMessageBody("scenario:fds list", { returnImmediately: true }),
    );
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const listing = await eventually("the command's listing", async () => {
      const text = await readFile(path.join(workspace, report), "utf8").catch(() => "");
      return text.includes("total") ? text : undefined;
    });
    const held = [...listing.matchAll(/ (\d+) -> (.*)$/gm)].map((m) => `${m[1]} -> ${m[2]}`);
    expect(
      held.map((line) => line.split(" ")[0]),
      listing,
    ).toEqual(["0", "1", "2"]);
    await eventually("the run to end", () => model.countOf("fds") >= 2);
    expect(await readFile(hostFile, "utf8")).toBe("");

    // The MCP server: neither descriptor exists in its /proc/self/fd.
    const probed = await a2a(
      server.url,
      created.body.credential.secret,
      sendMessageBody("scenario:probe look", { returnImmediately: true }),
    );
    expect(probed.status, JSON.stringify(probed.body)).toBe(200);
    await eventually("the probe's result to reach the model", () => model.countOf("probe") >= 2);
    const answered = model.stub.requests.filter((r) => readScenario(r.body) === "probe").at(-1);
    const result = readContent(answered?.body.messages.find((m) => m.role === "tool"));
    expect(result).toContain("/proc/self/fd/100");
    expect(result.match(/error: ENOENT/g) ?? [], result).toHaveLength(inherited.length);
  });
});
