// `peergate doctor` finds what the first hour trips on: an unpriced local model (every run of a
// budgeted caller refused), a model that does not answer, no operator token, a secret key that
// cannot open the sealed GitHub secrets; and `npm start` logs the same problems as warnings.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateSecretKeyText } from "../../src/auth/sealed-secrets.ts";
import { commands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { loadConfig } from "../../src/config.ts";
import { silentLogger } from "../../src/log.ts";
import { startServer } from "../../src/server.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createOpenAiStub, type OpenAiStub } from "../support/openai-stub.ts";
import { spawnServeChild } from "../support/serve-process.ts";

type Check = { check: string; status: string; detail: string; fix?: string };

describe("peergate doctor (pglite)", () => {
  let dir: string;
  let stub: OpenAiStub;
  let env: Record<string, string>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-doctor-"));
    stub = createOpenAiStub();
    const baseUrl = await stub.listen();
    stub.respondWith(() => ({ text: "ok" }));
    env = {
      PEERGATE_DATA_DIR: path.join(dir, "data"),
      PEERGATE_WORKSPACE: path.join(dir, "workspace"),
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
      PEERGATE_PORT: "0",
      PEERGATE_LOG_LEVEL: "silent",
      PEERGATE_MODEL: "openai-compatible:local-qwen",
      PEERGATE_MODEL_BASE_URL: baseUrl,
      PEERGATE_SANDBOX: "none",
    };
    // A server that ran once: migrated, with an admin token and one sealed GitHub secret.
    const server = await startServer(loadConfig(env, dir), silentLogger);
    await fetch(`${server.url}/admin/v1/callers`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${await readToken()}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ name: "gh", kind: "github", promptTemplate: "triage {{payload}}" }),
    });
    await server.stop();
    // A server's first start (PGlite, migrations) is slow on a loaded machine; nothing is timed.
  }, 180_000);
  afterAll(async () => {
    await stub?.close();
    await rm(dir, { recursive: true, force: true });
  });
  const readToken = async () =>
    (await readFile(path.join(dir, "data", "admin-token"), "utf8")).trim();

  const doctor = async (extraEnv: Record<string, string>, ...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(commands, ["doctor", "--json", ...argv], {
      env: { ...env, ...extraEnv },
      cwd: dir,
      io: { out: (t) => out.push(t), err: (t) => err.push(t) },
      signal: new AbortController().signal,
    });
    expect(err.join("\n")).toBe("");
    const parsed = JSON.parse(out.join("\n")) as { ok: boolean; checks: Check[] };
    const by = (name: string) => parsed.checks.find((c) => c.check === name);
    return { code, ...parsed, by };
  };

  it("says an unpriced model refuses every budgeted run, and how to price it", async () => {
    const r = await doctor({});
    expect(r.by("policies")?.status).toBe("ok");
    expect(r.by("model")).toMatchObject({ status: "ok", detail: "openai-compatible:local-qwen" });
    expect(r.by("model answers")?.status).toBe("ok");
    const price = r.by("model price");
    expect(price?.status).toBe("warn");
    expect(price?.detail).toContain("the default budgets have one");
    expect(price?.fix).toContain('"openai-compatible:local-qwen": { inputUsdPerMillionTokens: 0');
    expect(r.by("database")?.status).toBe("ok");
    expect(r.by("admin token")).toMatchObject({ status: "ok" });
    expect(r.by("operator token")?.status).toBe("warn");
    expect(r.by("secret key")?.status).toBe("ok");
    expect(r.by("sandbox")?.status).toBe("warn");
    expect(r.by("public URL")?.status).toBe("warn");
    expect(r.code).toBe(0);
  });

  it("names the gRPC binding when PEERGATE_GRPC_PORT is set, and warns when it is plaintext off loopback", async () => {
    expect((await doctor({}, "--no-model-call")).by("gRPC binding")).toBeUndefined();
    const on = await doctor({ PEERGATE_GRPC_PORT: "50051" }, "--no-model-call");
    expect(on.by("gRPC binding")).toMatchObject({ status: "ok" });
    expect(on.by("gRPC binding")?.detail).toContain("A2A over gRPC on 127.0.0.1:50051");
    const open = await doctor(
      { PEERGATE_GRPC_PORT: "50051", PEERGATE_GRPC_HOST: "0.0.0.0" },
      "--no-model-call",
    );
    expect(open.by("gRPC binding")?.status).toBe("warn");
    expect(open.by("gRPC binding")?.fix).toContain("PEERGATE_GRPC_PUBLIC_ADDRESS");
  });

  it("fails when the model does not answer, and --no-model-call skips the call", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const dead = { PEERGATE_MODEL_BASE_URL: `http://127.0.0.1:${port}/v1` };
    const r = await doctor(dead);
    expect(r.by("model answers")?.status).toBe("fail");
    expect(r.code).toBe(1);
    expect((await doctor(dead, "--no-model-call")).by("model answers")?.status).toBe("skip");
  });

  it("finds a secret key that cannot open the sealed GitHub secrets, before the first webhook", async () => {
    const r = await doctor({ PEERGATE_SECRET_KEY: generateSecretKeyText() }, "--no-model-call");
    expect(r.by("secret key")?.status).toBe("fail");
    expect(r.by("secret key")?.detail).toContain("cannot open 1 of 1");
    expect(r.code).toBe(1);
  });

  it("`npm start` logs the same problems as warnings", async () => {
    const child = await spawnServeChild({
      PATH: process.env.PATH ?? "",
      ...env,
      PEERGATE_LOG_LEVEL: "info",
    });
    child.child.kill("SIGTERM");
    expect(await child.exited).toBe(0);
    const warnings = child.logs
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: string; msg: string })
      .filter((l) => l.level === "warn")
      .map((l) => l.msg);
    expect(
      warnings.some((m) => m.startsWith("model price: openai-compatible:local-qwen has no price")),
    ).toBe(true);
    expect(warnings.some((m) => m.startsWith("operator token: not created"))).toBe(true);
  });
});

// The quick start's second terminal: the server was started with the model configured, the
// shell running doctor was not. Doctor asks the server and reports the server's model.
describe("peergate doctor asks the running server", () => {
  let dir: string;
  let stub: OpenAiStub;
  let server: Awaited<ReturnType<typeof startServer>>;
  let shell: Record<string, string>;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-doctor-server-"));
    stub = createOpenAiStub();
    const baseUrl = await stub.listen();
    stub.respondWith(() => ({ text: "ok" }));
    const common = {
      PEERGATE_DATA_DIR: path.join(dir, "data"),
      PEERGATE_WORKSPACE: path.join(dir, "workspace"),
      PEERGATE_POLICIES_DIR: repoPoliciesDir,
      PEERGATE_LOG_LEVEL: "silent",
      PEERGATE_SANDBOX: "none",
    };
    const serverEnv = {
      ...common,
      PEERGATE_PORT: "0",
      PEERGATE_MODEL: "openai-compatible:local-qwen",
      PEERGATE_MODEL_BASE_URL: baseUrl,
      PEERGATE_MODEL_API_KEY: "sk-server-only-secret",
    };
    server = await startServer(loadConfig(serverEnv, dir), silentLogger, serverEnv);
    // No model, no key: what a second terminal has. The policies name no model either.
    shell = { ...common, PEERGATE_URL: server.url };
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    await stub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const doctor = async (extraEnv: Record<string, string>, ...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(commands, ["doctor", ...argv], {
      env: { ...shell, ...extraEnv },
      cwd: dir,
      io: { out: (t) => out.push(t), err: (t) => err.push(t) },
      signal: new AbortController().signal,
    });
    return { code, out: out.join("\n"), err: err.join("\n") };
  };

  it("reports the server's model as OK and says it asked the server", async () => {
    const r = await doctor({}, "--json");
    expect(r.err).toBe("");
    const report = JSON.parse(r.out) as {
      view: string;
      server: string;
      note: string;
      checks: Check[];
    };
    expect(report.view).toBe("server");
    expect(report.server).toBe(server.url);
    const by = (name: string) => report.checks.find((c) => c.check === name);
    expect(by("model")).toMatchObject({ status: "ok", detail: "openai-compatible:local-qwen" });
    expect(by("model answers")?.status).toBe("ok");
    expect(by("database")?.status).toBe("ok");
    expect(by("policies")?.status).toBe("ok");
    expect(by("sandbox")?.status).toBe("warn");
    // The server's key never leaves it.
    expect(r.out).not.toContain("sk-server-only-secret");
    expect(stub.requests.at(-1)?.authorization).toBe("Bearer sk-server-only-secret");

    const text = await doctor({}, "--no-model-call");
    expect(text.out).toContain(`asked the server at ${server.url}: these are its checks`);
    expect(text.out).toMatch(/^OK +model +openai-compatible:local-qwen$/m);
  });

  it("--local, or no server answering, checks this shell and says so", async () => {
    const local = await doctor({}, "--local", "--no-model-call", "--json");
    const report = JSON.parse(local.out) as { view: string; note: string; checks: Check[] };
    expect(report.view).toBe("local");
    expect(report.note).toContain("this shell's environment (--local)");
    expect(report.checks.find((c) => c.check === "model")?.status).toBe("fail");
    // The CLI asked the server's control socket: it holds the embedded database, so doctor
    // leaves it alone rather than opening it beside the server.
    expect(report.checks.find((c) => c.check === "database")?.status).toBe("skip");

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const none = await doctor({ PEERGATE_URL: `http://127.0.0.1:${port}` }, "--no-model-call");
    expect(none.out).toContain(
      `checked locally, with this shell's environment (no server answered at http://127.0.0.1:${port})`,
    );
  });
});
