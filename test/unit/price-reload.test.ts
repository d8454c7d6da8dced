// The price file is read again without a restart (on change, or on SIGHUP); a bad file keeps the
// prices in force and says why; a run keeps the price it started with.
import { cp, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { watchPriceTable } from "../../src/load-policies.ts";
import { createLogger } from "../../src/log.ts";
import { findModelPrice } from "../../src/runs/prices.ts";
import { startServer } from "../../src/server.ts";
import { repoPoliciesDir } from "../support/app.ts";
import { createOpenAiStub, type OpenAiStub } from "../support/openai-stub.ts";

/** A logger whose lines can be awaited: `next("prices reloaded")` resolves at that message. */
function awaitableLogger() {
  const waiting: { msg: string; resolve: (line: Record<string, unknown>) => void }[] = [];
  const logger = createLogger({
    level: "info",
    write: (line) => {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      for (const w of waiting.splice(0)) {
        if (parsed.msg === w.msg) w.resolve(parsed);
        else waiting.push(w);
      }
    },
  });
  const next = (msg: string) =>
    new Promise<Record<string, unknown>>((resolve) => waiting.push({ msg, resolve }));
  return { logger, next };
}

/** As an editor saves: a new file renamed over the old one, so no reader sees half of it. */
async function save(file: string, text: string) {
  await writeFile(`${file}.tmp`, text);
  await rename(`${file}.tmp`, file);
}

const priced = (model: string) =>
  `models:\n  "${model}": { inputUsdPerMillionTokens: 0, outputUsdPerMillionTokens: 0 }\n`;

describe("price reload", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "peergate-prices-"));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("reloads on SIGHUP; a bad file keeps the old prices", async () => {
    const file = path.join(dir, "models.yaml");
    await writeFile(file, priced("a:one"));
    const { logger, next } = awaitableLogger();
    const live = await watchPriceTable({ file, logger });
    try {
      expect(findModelPrice(live.table, "a:one")).toBeDefined();
      const reloaded = next("prices reloaded");
      await save(file, priced("a:two"));
      process.kill(process.pid, "SIGHUP");
      await reloaded;
      expect(findModelPrice(live.table, "a:two")).toBeDefined();
      expect(findModelPrice(live.table, "a:one")).toBeUndefined();

      await save(file, "models:\n  a:three: { inputUsdPerMillionTokens: -1 }\n");
      const refused = await live.reload();
      expect(refused.ok).toBe(false);
      expect(findModelPrice(live.table, "a:two")).toBeDefined();
    } finally {
      await live.close();
    }
  });

  describe("in a running server", () => {
    let stub: OpenAiStub;
    let baseUrl: string;
    beforeAll(async () => {
      stub = createOpenAiStub();
      baseUrl = await stub.listen();
      stub.respondWith(() => ({ text: "done" }));
    });
    afterAll(async () => stub?.close());

    it("an unpriced local model stops refusing runs once a price line is added, no restart", async () => {
      const policies = path.join(dir, "policies");
      await cp(repoPoliciesDir, policies, { recursive: true });
      const { logger, next } = awaitableLogger();
      const env = {
        PEERGATE_DATA_DIR: path.join(dir, "data"),
        PEERGATE_WORKSPACE: path.join(dir, "workspace"),
        PEERGATE_POLICIES_DIR: policies,
        PEERGATE_PORT: "0",
        PEERGATE_MODEL: "openai-compatible:local-qwen",
        PEERGATE_MODEL_BASE_URL: baseUrl,
        PEERGATE_SANDBOX: "none",
      };
      const server = await startServer(loadConfig(env, dir), logger);
      try {
        const token = (
          await import("node:fs/promises").then((fs) =>
            fs.readFile(path.join(dir, "data", "admin-token"), "utf8"),
          )
        ).trim();
        const created = await fetch(`${server.url}/admin/v1/callers`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "local", kind: "peer" }),
        });
        const secret = ((await created.json()) as { credential: { secret: string } }).credential
          .secret;
        const send = async () => {
          const res = await fetch(`${server.url}/a2a`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${secret}`,
              "content-type": "application/json",
              "a2a-version": "1.0",
            },
            body: JSON.stringify({
              jsonrpc: "2.0",
              id: 1,
              method: "SendMessage",
              params: {
                configuration: { returnImmediately: false },
                message: {
                  messageId: crypto.randomUUID(),
                  role: "ROLE_USER",
                  parts: [{ text: "hi" }],
                },
              },
            }),
          });
          const answer = (await res.json()) as {
            result: { task: { metadata: { peergate: { runId: string } } } };
          };
          const runId = answer.result.task.metadata.peergate.runId;
          const run = await fetch(`${server.url}/admin/v1/runs/${runId}`, {
            headers: { authorization: `Bearer ${token}` },
          });
          return JSON.stringify(await run.json());
        };
        expect(await send()).toContain("cost-unknown");
        const reloaded = next("prices reloaded");
        const file = path.join(policies, "models.yaml");
        await save(file, priced("openai-compatible:local-qwen"));
        await reloaded;
        expect(await send()).not.toContain("cost-unknown");
      } finally {
        await server.stop();
      }
    });
  });
});
