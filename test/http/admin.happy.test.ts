import { afterEach, beforeEach, expect, it } from "vitest";
import { verifyAuditChain } from "../../src/db/audit.ts";
import { adminRequest, createTestApp, operatorRequest, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";

type Json = Record<string, any>;

describeEachDatabase("admin API: caller lifecycle", (db) => {
  let app: TestApp;
  beforeEach(async () => {
    app = await createTestApp(db.database);
  });
  afterEach(() => app.close());

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await adminRequest(app, method, path, body);
    return { status: res.status, body: (await res.json()) as Json, headers: res.headers };
  };
  /** With the operator token too: writes that widen a caller need it. */
  const operate = async (method: string, path: string, body?: unknown) => {
    const res = await operatorRequest(app, method, path, body);
    return { status: res.status, body: (await res.json()) as Json, headers: res.headers };
  };

  it("creates a caller of each kind and returns its credential once", async () => {
    const peer = await call("POST", "/callers", { name: "alice", kind: "peer" });
    expect(peer.status).toBe(201);
    expect(peer.body.credential.secret).toMatch(/^pg_[A-Za-z0-9_-]{43}$/);
    expect(peer.body.caller).toMatchObject({
      name: "alice",
      kind: "peer",
      tier: "public",
      version: 1,
    });

    const gh = await call("POST", "/callers", {
      name: "repo-bot",
      kind: "github",
      promptTemplate: "Summarise this {{event}}: {{payload}}",
      eventFilter: ["issues.opened"],
    });
    expect(gh.status).toBe(201);
    expect(gh.body.credential.secret).toMatch(/^pgh_/);

    const ifttt = await call("POST", "/callers", {
      name: "phone",
      kind: "ifttt",
      promptTemplate: "Note: {{payload}}",
    });
    expect(ifttt.body.credential.url).toBe(
      `http://127.0.0.1:9/webhooks/ifttt/phone/${ifttt.body.credential.secret}`,
    );
    const hook = await call("POST", "/callers", {
      name: "ci",
      kind: "webhook",
      promptTemplate: "Build finished: {{payload}}",
    });
    expect(hook.body.credential.secret).toMatch(/^pgw_/);

    // Never again: not in show, not in list, not in the audit trail.
    const secrets = [peer, gh, ifttt, hook].map((r) => r.body.credential.secret as string);
    const shown = JSON.stringify([
      (await call("GET", "/callers")).body,
      (await call("GET", "/callers/alice")).body,
      (await call("GET", "/audit")).body,
    ]);
    for (const secret of secrets) expect(shown).not.toContain(secret.slice(4));
    const list = (await call("GET", "/callers")).body.callers as Json[];
    expect(list.map((c) => c.name)).toEqual(["alice", "ci", "phone", "repo-bot"]);
  });

  it("narrows a caller with PATCH, bumping the version and recording what changed", async () => {
    await operate("POST", "/callers", { name: "alice", kind: "peer", tier: "private" });
    // Lower tier, but new allow entries: that part widens, so the operator signs too.
    const res = await operate("PATCH", "/callers/alice", {
      tier: "public",
      allow: ["web_fetch", "no_such_tool"],
    });
    expect(res.status).toBe(200);
    expect(res.body.caller).toMatchObject({
      tier: "public",
      version: 2,
      allow: ["web_fetch", "no_such_tool"],
    });
    expect(res.body.changed.sort()).toEqual(["allow", "tier"]);
    expect(res.body.unknownAllowEntries).toEqual(["no_such_tool"]);
    const audit = (await call("GET", "/audit?kind=caller.updated")).body.events as Json[];
    expect(audit).toHaveLength(1);
    expect(audit[0]?.data.changes.tier).toEqual({ from: "private", to: "public" });
  });

  it("explains the ceiling tool by tool, from the caller's tier and allow list", async () => {
    await operate("POST", "/callers", {
      name: "alice",
      kind: "peer",
      tier: "internal",
      allow: ["web_fetch"],
    });
    const res = await call("GET", "/callers/alice/ceiling");
    expect(res.status).toBe(200);
    const byTool = new Map((res.body.decisions as Json[]).map((d) => [d.tool, d]));
    expect(byTool.get("ls")).toMatchObject({ admitted: true, reason: "tier-admits-read-only" });
    expect(byTool.get("read_file")).toMatchObject({
      admitted: false,
      reason: "disclosure-above-tier",
    });
    expect(byTool.get("web_fetch")).toMatchObject({ admitted: true, reason: "named-in-allow" });
    expect(byTool.get("write_file")).toMatchObject({
      admitted: false,
      reason: "acting-tool-needs-allow",
    });
    expect(res.body.admitted).toContain("web_fetch");
  });

  it("lists the tool inventory with risk, disclosure and egress", async () => {
    const res = await call("GET", "/tools");
    const tools = res.body.tools as Json[];
    expect(tools.find((t) => t.name === "web_fetch")).toMatchObject({
      risk: "read-only",
      disclosure: "public",
      egress: true,
    });
  });

  it("revokes totally: tier none, credentials dead, ceiling empty, chain intact", async () => {
    const created = await operate("POST", "/callers", {
      name: "alice",
      kind: "peer",
      tier: "private",
      allow: ["write_file"],
    });
    const res = await call("POST", "/callers/alice/revoke", { reason: "leaked token" });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      credentialsRevoked: 1,
      caller: { tier: "none", revoked: true },
    });
    expect(res.body.caller.credentials[0].active).toBe(false);
    const ceiling = await call("GET", "/callers/alice/ceiling");
    expect(ceiling.body.admitted).toEqual([]);
    expect((ceiling.body.decisions as Json[]).every((d) => d.reason === "caller-revoked")).toBe(
      true,
    );
    // PATCH cannot hand a revoked caller a tier back.
    const patch = await call("PATCH", "/callers/alice", { tier: "public" });
    expect(patch.status).toBe(409);
    expect(patch.body.detail).toContain("restore");
    const audit = (await call("GET", "/audit?kind=caller.revoked")).body.events as Json[];
    expect(audit[0]?.data).toMatchObject({ reason: "leaked token", previousTier: "private" });
    expect(JSON.stringify(audit)).not.toContain(created.body.credential.secret);
    expect(await verifyAuditChain(db.db)).toMatchObject({ ok: true });
  });

  it("restores a revoked caller only explicitly, with a new credential", async () => {
    const first = await call("POST", "/callers", { name: "alice", kind: "peer" });
    await call("POST", "/callers/alice/revoke");
    const res = await operate("POST", "/callers/alice/restore", { tier: "internal" });
    expect(res.status).toBe(200);
    expect(res.body.credential.secret).not.toBe(first.body.credential.secret);
    expect(res.body.caller).toMatchObject({ tier: "internal", revoked: false });
    const active = (res.body.caller.credentials as Json[]).filter((c) => c.active);
    expect(active).toHaveLength(1);
    expect(active[0]?.id).toBe(res.body.credential.id);
    expect((await operate("POST", "/callers/alice/restore", { tier: "public" })).status).toBe(409);
  });

  it("rotates a credential, keeping the old one for the grace period asked for", async () => {
    await call("POST", "/callers", { name: "alice", kind: "peer" });
    const now = await call("POST", "/callers/alice/rotate");
    expect(now.status).toBe(200);
    let active = (now.body.caller.credentials as Json[]).filter((c) => c.active);
    expect(active.map((c) => c.id)).toEqual([now.body.credential.id]);

    const graceful = await call("POST", "/callers/alice/rotate", { graceSeconds: 3600 });
    active = (graceful.body.caller.credentials as Json[]).filter((c) => c.active);
    expect(active).toHaveLength(2);
    expect(graceful.body.caller.version).toBe(3);
  });

  it("pages the audit trail and verifies it", async () => {
    await call("POST", "/callers", { name: "a", kind: "peer" });
    await call("POST", "/callers", { name: "b", kind: "peer" });
    const page = await call("GET", "/audit?limit=1");
    expect(page.body.events).toHaveLength(1);
    const next = await call("GET", `/audit?after=${page.body.next}&limit=100`);
    expect((next.body.events as Json[])[0]?.seq).toBe((page.body.events as Json[])[0]?.seq + 1);
    expect((await call("GET", "/audit/verify")).body).toMatchObject({ ok: true });
  });
});
