// Webhooks that never fail silently, against the real server: GitHub's default content type
// (form-encoded) starts a run on its payload; a delivery whose run failed at the model starts a
// new run when GitHub redelivers it (audited as a retry), and one whose run completed stays a
// duplicate; a content type GitHub does not send is a 415 in GitHub's delivery log and an audit
// event, not a silent 200. IFTTT: an applet that fires the same body twice gets two runs; only an
// Idempotency-Key the sender repeats makes the second a duplicate.
import { sign } from "@octokit/webhooks-methods";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commands } from "../../src/cli/commands.ts";
import { runCli } from "../../src/cli/run-cli.ts";
import { createOpenAiStub, type OpenAiStub } from "../support/openai-stub.ts";
import {
  addCaller,
  copyPolicies,
  type Peergate,
  removeTempDirs,
  startPeergateOn,
  waitForRun,
} from "./support.ts";

describe("webhooks that fail loudly and can be retried", () => {
  let stub: OpenAiStub;
  let peergate: Peergate;
  let modelDown = true;

  beforeAll(async () => {
    stub = createOpenAiStub();
    // A 400 is not retried by the provider package: the run fails at once.
    stub.respondWith(() =>
      modelDown ? { error: { status: 400, message: "model unavailable" } } : { text: "done" },
    );
    peergate = await startPeergateOn("pglite", {
      policiesDir: await copyPolicies(),
      modelBaseUrl: await stub.listen(),
    });
  }, 300_000);
  afterAll(async () => {
    await peergate?.stop();
    await stub?.close();
    await removeTempDirs();
  });

  it("GitHub: form-encoded deliveries run; Redeliver retries a failed run, not a completed one", async () => {
    const caller = await addCaller(peergate, {
      name: "gh-retry",
      kind: "github",
      tier: "public",
      promptTemplate: "Triage this {{event}} event:\n{{payload}}",
      eventFilter: ["issues"],
    });
    const json = JSON.stringify({ action: "opened", issue: { number: 41, title: "Crash" } });
    // GitHub's default content type: the JSON in a `payload` form field, signed as sent.
    const form = `payload=${encodeURIComponent(json)}`;
    const deliveryId = crypto.randomUUID();
    const deliver = async (body: string, contentType = "application/x-www-form-urlencoded") =>
      fetch(`${peergate.url}/webhooks/github/gh-retry`, {
        method: "POST",
        headers: {
          "content-type": contentType,
          "x-github-event": "issues",
          "x-github-delivery": deliveryId,
          "x-hub-signature-256": await sign(caller.secret, body),
        },
        body,
      });

    const first = await deliver(form);
    expect(first.status).toBe(202);
    const failed = ((await first.json()) as { runId: string }).runId;
    const run = await waitForRun(peergate, failed, ["failed"], 120_000);
    // The model saw the JSON payload, not the form encoding.
    expect(JSON.stringify(run.messages)).toContain("Crash");
    expect(JSON.stringify(run.messages)).not.toContain("payload=");

    modelDown = false;
    const redelivered = await deliver(form);
    expect(redelivered.status).toBe(202);
    const retry = (await redelivered.json()) as { runId: string; retryOf: string };
    expect(retry.retryOf).toBe(failed);
    expect(retry.runId).not.toBe(failed);
    await waitForRun(peergate, retry.runId, ["completed"], 120_000);

    const again = await deliver(form);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ status: "duplicate", runId: retry.runId });

    const audit = await peergate.admin(
      "GET",
      `/audit?kind=webhook.accepted&subject=run:${retry.runId}`,
    );
    expect(audit.body.events[0]?.data).toMatchObject({ retryOf: failed });
  }, 300_000);

  it("peergate runs retry: a failed webhook run starts again, audited; a completed one is refused", async () => {
    const cli = async (...argv: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(commands, argv, {
        env: { PEERGATE_URL: peergate.url, PEERGATE_ADMIN_TOKEN: peergate.adminToken },
        cwd: peergate.workspace,
        io: { out: (t) => out.push(t), err: (t) => err.push(t) },
        signal: new AbortController().signal,
      });
      return { code, out: out.join("\n"), err: err.join("\n") };
    };
    const caller = await addCaller(peergate, {
      name: "gh-cli-retry",
      kind: "github",
      tier: "public",
      promptTemplate: "Summarise this {{event}} event:\n{{payload}}",
    });
    const body = JSON.stringify({ action: "opened", issue: { number: 7, title: "Flaky test" } });
    modelDown = true;
    const delivered = await fetch(`${peergate.url}/webhooks/github/gh-cli-retry`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": crypto.randomUUID(),
        "x-hub-signature-256": await sign(caller.secret, body),
      },
      body,
    });
    expect(delivered.status).toBe(202);
    const failed = ((await delivered.json()) as { runId: string }).runId;
    await waitForRun(peergate, failed, ["failed"], 120_000);

    const help = await cli("runs", "retry", "--help");
    expect(help.out).toContain("Usage: peergate runs retry <run-id> [--json]");

    modelDown = false;
    const retried = await cli("runs", "retry", failed, "--json");
    expect(retried.code, retried.err).toBe(0);
    const { runId, retryOf } = JSON.parse(retried.out) as { runId: string; retryOf: string };
    expect(retryOf).toBe(failed);
    const run = await waitForRun(peergate, runId, ["completed"], 120_000);
    expect(JSON.stringify(run.messages)).toContain("Flaky test");
    const audit = await peergate.admin("GET", `/audit?kind=webhook.accepted&subject=run:${runId}`);
    expect(audit.body.events[0]).toMatchObject({
      actor: "admin",
      data: { retryOf: failed, via: "runs retry" },
    });

    // Retried once: the old run's delivery belongs to the new run now.
    const twice = await cli("runs", "retry", failed);
    expect(twice.code).not.toBe(0);
    expect(twice.err).toContain("already retried");
    // A run that completed has nothing to retry, and the refusal says so.
    const done = await cli("runs", "retry", runId);
    expect(done.code).not.toBe(0);
    expect(done.err).toContain(`run ${runId} completed: there is nothing to retry`);
  }, 300_000);

  it("GitHub: a content type it does not send is refused 415 and audited, and can be redelivered", async () => {
    const caller = await addCaller(peergate, {
      name: "gh-types",
      kind: "github",
      tier: "public",
      promptTemplate: "{{payload}}",
    });
    const body = JSON.stringify({ action: "opened", issue: { number: 1 } });
    const deliver = async (contentType: string) =>
      fetch(`${peergate.url}/webhooks/github/gh-types`, {
        method: "POST",
        headers: {
          "content-type": contentType,
          "x-github-event": "issues",
          "x-github-delivery": "types-1",
          "x-hub-signature-256": await sign(caller.secret, body),
        },
        body,
      });
    const refused = await deliver("text/plain");
    expect(refused.status).toBe(415);
    expect(await refused.json()).toMatchObject({ status: "refused" });
    const audit = await peergate.admin("GET", "/audit?kind=webhook.refused");
    expect(JSON.stringify(audit.body.events)).toContain("text/plain");
    // Nothing was claimed: the same delivery, sent right, runs.
    expect((await deliver("application/json")).status).toBe(202);
  }, 120_000);

  it("IFTTT: the same body twice is two fires; a repeated Idempotency-Key is one", async () => {
    const caller = await addCaller(peergate, {
      name: "phone-notes",
      kind: "ifttt",
      tier: "public",
      promptTemplate: "Note: {{payload}}",
    });
    const fire = (headers: Record<string, string> = {}) =>
      fetch(`${peergate.url}/webhooks/ifttt/phone-notes/${caller.secret}`, {
        method: "POST",
        headers: { "content-type": "text/plain", ...headers },
        body: "buy milk",
      });
    const one = await fire();
    const two = await fire();
    expect([one.status, two.status]).toEqual([202, 202]);
    const runIdOf = async (res: Response) => ((await res.json()) as { runId: string }).runId;
    const ids = [await runIdOf(one), await runIdOf(two)];
    expect(new Set(ids).size).toBe(2);
    const keyed = await fire({ "idempotency-key": "fire-7" });
    expect(keyed.status).toBe(202);
    const repeat = await fire({ "idempotency-key": "fire-7" });
    expect(repeat.status).toBe(200);
    expect(await repeat.json()).toMatchObject({
      status: "duplicate",
      runId: await runIdOf(keyed),
    });
  }, 120_000);
});
