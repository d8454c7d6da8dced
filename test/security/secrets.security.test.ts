// Logs, metrics and the audit trail never contain a secret. One real server, with a model behind
// the OpenAI-compatible stub, is driven through every credential kind — peer token, peer JWT,
// webhook token, GitHub secret, IFTTT secret URL, admin token, operator token — used correctly
// (runs start, complete, park and are approved) and incorrectly (flipped characters, the wrong
// route, the wrong header, the query string, a mistyped URL). Then every log line (debug level),
// the /metrics body and the audit trail are searched for each secret and its random part.
import { randomBytes } from "node:crypto";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventuallyValue } from "../support/eventually.ts";
import {
  countAssistantTurns,
  createOpenAiStub,
  type OpenAiStub,
  readContent,
} from "../support/openai-stub.ts";
import { recordCase } from "./cases.ts";
import { signGithub } from "./routes.ts";
import { type Reply, type SecurityServer, send, startSecurityServer } from "./support.ts";

const modelId = "openai-compatible:stub";
const modelApiKey = `sk-stub-${randomBytes(24).toString("base64url")}`;
const secretKey = randomBytes(32).toString("hex");

let s: SecurityServer;
let stub: OpenAiStub;
/** Every secret of the scenario, by what it is. */
const secrets = new Map<string, string>();

beforeAll(async () => {
  stub = createOpenAiStub();
  // A run whose user turn says "write" asks for write_file once; any other calls ls once; then
  // the model answers.
  stub.respondWith((request) => {
    const turns = countAssistantTurns(request);
    const user = readContent(request.messages.find((m) => m.role === "user"));
    if (turns === 0 && user.includes("write")) {
      return {
        calls: [
          {
            id: "call_w",
            name: "write_file",
            arguments: JSON.stringify({ path: "out.txt", content: "hi\n" }),
          },
        ],
      };
    }
    if (turns === 0) return { calls: [{ id: "call_ls", name: "ls", arguments: "{}" }] };
    return { text: "All done." };
  });
  const baseUrl = await stub.listen();
  s = await startSecurityServer({
    freeModel: modelId,
    env: {
      PEERGATE_MODEL: modelId,
      PEERGATE_MODEL_BASE_URL: baseUrl,
      PEERGATE_MODEL_API_KEY: modelApiKey,
      PEERGATE_SECRET_KEY: secretKey,
    },
  });
  secrets.set("admin token", s.adminToken);
  secrets.set("model API key", modelApiKey);
  secrets.set("secret key", secretKey);
}, 60_000);

afterAll(async () => {
  await s?.stop();
  await stub?.close();
});

const flip = (t: string) => `${t.slice(0, -1)}${t.endsWith("A") ? "B" : "A"}`;

function a2a(authorization: string, text: string, method = "SendMessage"): Promise<Reply> {
  return send(s.port, {
    method: "POST",
    path: "/a2a",
    headers: { authorization, "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method,
      params: {
        message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] },
        configuration: { blocking: true },
      },
    }),
  });
}

function waitForRuns(status: string, count: number): Promise<any[]> {
  return eventuallyValue(
    `${count} ${status} runs`,
    async () => (await s.admin("GET", `/runs?status=${status}&limit=100`)).json.runs as any[],
    (runs) => runs.length >= count,
  );
}

describe("secrets in logs, metrics and the audit trail", () => {
  it("uses every credential kind right and wrong, then finds none of them anywhere", async () => {
    const add = async (body: Record<string, unknown>) => {
      const res = await s.admin("POST", "/callers", body);
      expect(res.status, res.text).toBe(201);
      return res.json.credential as { secret: string; url?: string };
    };
    const peer = await add({ name: "alice", kind: "peer", tier: "internal" });
    const writer = await add({
      name: "writer",
      kind: "peer",
      allow: ["write_file"],
      approvalPolicy: "read-only",
    });
    const keys = await generateKeyPair("ES256", { extractable: true });
    await add({
      name: "agent-b",
      kind: "peer",
      jwt: {
        issuer: "https://b.example",
        audience: "peergate",
        algorithms: ["ES256"],
        jwk: await exportJWK(keys.publicKey),
      },
    });
    const hook = await add({ name: "ci", kind: "webhook", promptTemplate: "CI: {{payload}}" });
    const github = await add({ name: "repo", kind: "github", promptTemplate: "GH: {{payload}}" });
    const ifttt = await add({ name: "phone", kind: "ifttt", promptTemplate: "Note: {{payload}}" });
    const operator = await s.newOperatorToken();
    const jwt = await new SignJWT({ jti: "jti-1" })
      .setProtectedHeader({ alg: "ES256" })
      .setIssuer("https://b.example")
      .setAudience("peergate")
      .setIssuedAt()
      .setExpirationTime("2m")
      .sign(keys.privateKey);
    secrets.set("peer token", peer.secret);
    secrets.set("second peer token", writer.secret);
    secrets.set("webhook token", hook.secret);
    secrets.set("GitHub secret", github.secret);
    secrets.set("IFTTT secret", ifttt.secret);
    secrets.set("operator token", operator);
    secrets.set("JWT", jwt);
    secrets.set("JWT signature", jwt.split(".")[2] ?? "");

    // ---- used correctly
    expect((await a2a(`Bearer ${peer.secret}`, "hello")).status).toBe(200);
    expect((await a2a(`Bearer ${jwt}`, "hello from b")).status).toBe(200);
    const hookBody = '{"build":1}';
    expect(
      (
        await send(s.port, {
          method: "POST",
          path: "/webhooks/ci",
          headers: { authorization: `Bearer ${hook.secret}`, "content-type": "application/json" },
          body: hookBody,
        })
      ).status,
    ).toBe(202);
    const ghBody = JSON.stringify({ action: "opened", issue: { title: "x" } });
    expect(
      (
        await send(s.port, {
          method: "POST",
          path: "/webhooks/github/repo",
          headers: {
            "content-type": "application/json",
            "x-github-event": "issues",
            "x-github-delivery": "d-1",
            "x-hub-signature-256": signGithub(github.secret, ghBody),
          },
          body: ghBody,
        })
      ).status,
    ).toBe(202);
    expect(ifttt.url).toContain(ifttt.secret);
    expect(
      (
        await send(s.port, {
          method: "POST",
          path: new URL(ifttt.url ?? "").pathname,
          headers: { "content-type": "text/plain" },
          body: "remember the milk",
        })
      ).status,
    ).toBe(202);
    // A run that parks, and is approved with the admin and operator tokens.
    expect((await a2a(`Bearer ${writer.secret}`, "please write")).status).toBe(200);
    const [parked] = await waitForRuns("parked", 1);
    const detail = (await s.admin("GET", `/runs/${parked.id}`)).json.run;
    const approve = (operatorToken: string) =>
      send(s.port, {
        method: "POST",
        path: `/admin/v1/runs/${parked.id}/approve`,
        headers: {
          authorization: `Bearer ${s.adminToken}`,
          "x-peergate-operator-token": operatorToken,
          "content-type": "application/json",
        },
        body: JSON.stringify({
          callId: detail.pending.callId,
          argsDigest: detail.pending.argsDigest,
        }),
      });
    expect((await approve(flip(operator))).status).toBe(401);
    expect((await approve(operator)).status).toBe(202);
    await waitForRuns("completed", 6);

    // ---- used wrongly
    const wrong: Promise<Reply>[] = [];
    for (const [what, secret] of secrets) {
      if (what === "JWT signature") continue;
      for (const value of [secret, flip(secret)]) {
        wrong.push(
          a2a(`Bearer ${value}`, "again"),
          s.admin("GET", `/callers?token=${encodeURIComponent(value)}`),
          send(s.port, {
            method: "GET",
            path: "/admin/v1/callers",
            headers: { authorization: `Bearer ${value}` },
          }),
          send(s.port, {
            method: "POST",
            path: "/webhooks/ci",
            headers: { authorization: `Bearer ${value}`, "content-type": "application/json" },
            body: '{"build":2}',
          }),
          // Mistyped URLs: a secret as a caller name, in an unmatched path, in the wrong segment.
          send(s.port, { method: "POST", path: `/webhooks/${value}`, body: "x" }),
          send(s.port, { method: "POST", path: `/webhooks/ifttt/${value}`, body: "x" }),
          send(s.port, { method: "POST", path: `/webhooks/ifttt/phone/${value}/extra`, body: "x" }),
          send(s.port, { method: "GET", path: `/a2a/${value}` }),
          send(s.port, { method: "POST", path: `/webhooks/ifttt/phone/${value}`, body: "y" }),
          send(s.port, {
            method: "POST",
            path: "/webhooks/github/repo",
            headers: {
              "x-hub-signature-256": signGithub(value, ghBody),
              "x-github-event": "issues",
            },
            body: ghBody,
          }),
        );
      }
    }
    const replies = await Promise.all(wrong);
    // (Some of these are a secret in its own right place: those are answered normally.)
    for (const reply of replies) expect(reply.status).toBeLessThan(500);

    // ---- where secrets must not be
    const metrics = (await send(s.port, { method: "GET", path: "/metrics" })).text;
    expect(metrics).toContain("http_requests");
    const audit = (await s.admin("GET", "/audit?limit=1000")).text;
    const places: Record<string, string> = {
      "log lines": s.logLines.join("\n"),
      "/metrics": metrics,
      "audit trail": audit,
    };
    expect(s.logLines.length).toBeGreaterThan(100);
    const leaks: string[] = [];
    for (const [what, secret] of secrets) {
      // The secret, and its random part alone (what follows a `pg_`-style prefix). The 4
      // characters after the prefix are the display prefix, shown on purpose.
      const random = secret.slice(secret.indexOf("_") + 1);
      const needles = [secret, random.slice(4)].filter((n) => n.length >= 16);
      for (const [place, text] of Object.entries(places)) {
        const found = needles.find((n) => text.includes(n));
        recordCase("secrets", `${what} in ${place}`, found !== undefined);
        if (found) {
          const at = text.indexOf(found);
          leaks.push(`${what} in ${place}: …${text.slice(Math.max(0, at - 200), at + 60)}…`);
        }
      }
    }
    expect(leaks).toEqual([]);
  });
});
