// Webhook attacks the route-level suite does not already prove, through the real server.
//
// Already proven in test/http/webhooks.security.test.ts, and not repeated here: a SHA-1-only
// signature, upper-case hex, truncated and non-hex digests, another secret, re-serialised JSON,
// one changed byte, a BOM, an empty body, an unknown name (one identical 401 for all); redelivery,
// the same body under a new delivery id, the same id with another body; a ping header on a
// non-ping payload; IFTTT wrong, short, other-caller, case-changed and percent-encoded secrets.
// test/security/routes.security.test.ts adds doubled and foreign credentials on every route.
//
// New here: the event header is not signed, so a body GitHub signed for one event, replayed with
// the header of another, must not pass the caller's event filter.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectRefused } from "./cases.ts";
import { signGithub } from "./routes.ts";
import { type SecurityServer, send, startSecurityServer } from "./support.ts";

let s: SecurityServer;
let secret = "";
let hookToken = "";
let counter = 0;

beforeAll(async () => {
  s = await startSecurityServer();
  const repo = await s.admin("POST", "/callers", {
    name: "repo",
    kind: "github",
    promptTemplate: "Event {{event}}: {{payload}}",
    eventFilter: ["issues"],
  });
  secret = repo.json.credential.secret;
  const hook = await s.admin("POST", "/callers", {
    name: "ci",
    kind: "webhook",
    promptTemplate: "CI: {{payload}}",
  });
  hookToken = hook.json.credential.secret;
}, 60_000);

afterAll(async () => {
  await s?.stop();
});

async function runCount(): Promise<number> {
  return (await s.admin("GET", "/runs?limit=500")).json.runs.length;
}

/** A delivery as GitHub sends it: the body signed, the event and delivery id beside it. */
function deliver(body: string, event: string, deliveryId = `d-${counter++}`) {
  return send(s.port, {
    method: "POST",
    path: "/webhooks/github/repo",
    headers: {
      "content-type": "application/json",
      "x-github-event": event,
      "x-github-delivery": deliveryId,
      "x-hub-signature-256": signGithub(secret, body),
    },
    body,
  });
}

describe("GitHub's unsigned event header", () => {
  it("a signed body of a filtered-out event, replayed as an admitted event, starts no run", async () => {
    // Three deliveries GitHub really made (signed), none of which this caller's filter admits.
    const captured = [
      {
        event: "push",
        body: JSON.stringify({ ref: "refs/heads/main", before: "a", after: "b", commits: [] }),
      },
      {
        event: "issue_comment",
        body: JSON.stringify({ action: "created", issue: { number: 1 }, comment: { body: "hi" } }),
      },
      { event: "ping", body: JSON.stringify({ zen: "Design for failure.", hook_id: 7 }) },
    ];
    for (const c of captured) {
      const first = await deliver(c.body, c.event);
      expect(first.status, c.event).toBe(200); // ignored, or pong
    }
    const before = await runCount();
    for (const c of captured) {
      for (const spoofed of ["issues", "issues.opened"]) {
        // The attacker has the body and its signature, and picks the headers.
        const replay = await deliver(c.body, spoofed);
        const started = replay.status === 202;
        expectRefused(
          "webhooks",
          `signed ${c.event} body replayed as ${spoofed} (→ ${replay.status} ${replay.text.slice(0, 60)})`,
          started,
        );
      }
    }
    expect(await runCount()).toBe(before);
    // A genuine issues delivery still starts a run: the filter is not simply closed.
    const genuine = await deliver(
      JSON.stringify({ action: "opened", issue: { number: 2 } }),
      "issues",
    );
    expect(genuine.status).toBe(202);
  });

  it("event header variants never stand in for an admitted event", async () => {
    const before = await runCount();
    // (Whitespace around a header value is HTTP's, stripped before we see it: not a variant.)
    for (const event of ["Issues", "ISSUES", "issues.opened", "", "issues,push", "issue"]) {
      const body = JSON.stringify({ action: "opened", issue: { number: 100 + counter } });
      const reply = await deliver(body, event);
      expectRefused(
        "webhooks",
        `event header ${JSON.stringify(event)} (→ ${reply.status})`,
        reply.status === 202,
      );
    }
    expect(await runCount()).toBe(before);
  });

  it("a delivery without an id is still claimed once, by its body", async () => {
    const body = JSON.stringify({ action: "opened", issue: { number: 999 } });
    const headers = {
      "content-type": "application/json",
      "x-github-event": "issues",
      "x-hub-signature-256": signGithub(secret, body),
    };
    const first = await send(s.port, {
      method: "POST",
      path: "/webhooks/github/repo",
      headers,
      body,
    });
    expect(first.status).toBe(202);
    const again = await send(s.port, {
      method: "POST",
      path: "/webhooks/github/repo",
      headers,
      body,
    });
    expectRefused(
      "webhooks",
      `the same body without a delivery id (→ ${again.status})`,
      again.status === 202,
    );
  });
});

describe("generic webhooks", () => {
  // The bearer token is the sender's whole authority: whoever replays a captured request holds it
  // and could send any body, so repeating a body is no attack, and a sender's repeat is a real
  // fire (docs/operating.md). What must hold is the sender's own retry: under the same
  // Idempotency-Key there is never a second run beside the first, only a retry of a failed one.
  it("a retry under the same Idempotency-Key is the same fire (or a retry of its failed run)", async () => {
    const post = () =>
      send(s.port, {
        method: "POST",
        path: "/webhooks/ci",
        headers: {
          authorization: `Bearer ${hookToken}`,
          "content-type": "application/json",
          "idempotency-key": "build-42",
        },
        body: '{"build":42}',
      });
    const first = await post();
    expect(first.status).toBe(202);
    const firstRun = (JSON.parse(first.text) as { runId: string }).runId;
    const replay = await post();
    const answer = JSON.parse(replay.text) as { runId?: string; retryOf?: string };
    const firstFailed = async () =>
      (await s.admin("GET", `/runs/${firstRun}`)).json?.run?.status === "failed";
    expectRefused(
      "webhooks",
      `generic webhook retried under the same Idempotency-Key (→ ${replay.status} ${replay.text.slice(0, 80)})`,
      replay.status === 202 && !(answer.retryOf === firstRun && (await firstFailed())),
    );
  });
});
