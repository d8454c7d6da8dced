// Authority has two keys: every admin write that widens a caller, tried with the admin token alone,
// is a 403 naming the operator token and the widened field and changes nothing; the same write with
// the operator token too is applied; every narrowing needs the admin token alone.
import { afterEach, beforeEach, expect, it } from "vitest";
import { defaultBudgets, mergeBudgets } from "../../src/services/caller-input.ts";
import { adminRequest, createTestApp, operatorRequest, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";

type Json = Record<string, any>;

/** A caller above the floor, with something to widen and to narrow in every field. */
const existing = {
  name: "alice",
  kind: "peer",
  tier: "internal",
  allow: ["write_file"],
  approvalPolicy: "low-risk",
  budgets: { tokens: 1000, costUsd: 1, daily: { runs: 5, costUsd: 2 } },
};
/**
 * What the server stores for `existing`: its budgets merged over the defaults, daily included
 * (only the limits named change; the default daily token cap stays).
 */
const storedBudgets = mergeBudgets(defaultBudgets, existing.budgets);
const hook = {
  name: "gh",
  kind: "github",
  tier: "internal",
  allow: ["write_file"],
  promptTemplate: "Summarise {{payload}}",
  eventFilter: ["issues"],
};
const jwt = {
  issuer: "https://attacker.example",
  audience: "peergate",
  algorithms: ["ES256"],
  jwksUrl: "https://attacker.example/jwks.json",
};

type Case = {
  name: string;
  /** Callers created (as the operator) before the write. */
  setup: Json[];
  revokeFirst?: string;
  method: string;
  path: string;
  body?: unknown;
  /** Fields the refusal must name. */
  fields: string[];
  status: number;
};

const widenings: Case[] = [
  {
    name: "a higher tier",
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    body: { tier: "private" },
    fields: ["tier"],
    status: 200,
  },
  {
    name: "a new allow entry",
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    body: { allow: ["write_file", "execute_command"] },
    fields: ["allow"],
    status: 200,
  },
  {
    name: "a milder approval policy",
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    body: { approvalPolicy: "auto" },
    fields: ["approvalPolicy"],
    status: 200,
  },
  {
    name: "a larger budget",
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    body: { budgets: { ...storedBudgets, tokens: 1_000_000 } },
    fields: ["budgets.tokens"],
    status: 200,
  },
  {
    name: "a budget removed",
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    // A PATCH replaces the budgets object: leaving a limit out removes it.
    body: { budgets: { ...storedBudgets, tokens: undefined } },
    fields: ["budgets.tokens"],
    status: 200,
  },
  {
    name: "a larger daily budget",
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    body: { budgets: { ...storedBudgets, daily: { ...storedBudgets.daily, runs: 500 } } },
    fields: ["budgets.daily.runs"],
    status: 200,
  },
  {
    name: "new JWT trust for a caller with an acting tool",
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    body: { jwt },
    fields: ["jwt"],
    status: 200,
  },
  {
    name: "a new prompt template for a webhook with an acting tool",
    setup: [hook],
    method: "PATCH",
    path: "/callers/gh",
    body: { promptTemplate: "Write what {{payload}} asks" },
    fields: ["promptTemplate"],
    status: 200,
  },
  {
    name: "more events for a webhook with an acting tool",
    setup: [hook],
    method: "PATCH",
    path: "/callers/gh",
    body: { eventFilter: null },
    fields: ["eventFilter"],
    status: 200,
  },
  {
    name: "a restore",
    setup: [{ name: "alice", kind: "peer" }],
    revokeFirst: "alice",
    method: "POST",
    path: "/callers/alice/restore",
    body: { tier: "public" },
    fields: ["tier"],
    status: 200,
  },
  {
    name: "a new caller with an allow list",
    setup: [],
    method: "POST",
    path: "/callers",
    body: { name: "bob", kind: "peer", allow: ["web_fetch"] },
    fields: ["allow"],
    status: 201,
  },
  {
    name: "a new caller with a tier above public",
    setup: [],
    method: "POST",
    path: "/callers",
    body: { name: "bob", kind: "peer", tier: "private" },
    fields: ["tier"],
    status: 201,
  },
  {
    name: "a new caller with budgets above the defaults",
    setup: [],
    method: "POST",
    path: "/callers",
    body: { name: "bob", kind: "peer", budgets: { costUsd: 1000 } },
    fields: ["budgets.costUsd"],
    status: 201,
  },
  {
    name: "a new caller whose daily budget drops a default cap",
    setup: [],
    method: "POST",
    path: "/callers",
    // A new caller's budgets merge over the defaults, so dropping a cap is said with null.
    body: {
      name: "bob",
      kind: "peer",
      budgets: { daily: { runs: 5, tokens: null, costUsd: null } },
    },
    fields: ["budgets.daily.tokens", "budgets.daily.costUsd"],
    status: 201,
  },
  {
    name: "a new credential for a caller above the floor (rotate)",
    setup: [existing],
    method: "POST",
    path: "/callers/alice/rotate",
    fields: ["tier", "allow"],
    status: 200,
  },
];

const narrowings: Omit<Case, "fields">[] = [
  ...[
    { tier: "public" },
    { allow: [] },
    { approvalPolicy: "read-only" },
    { budgets: { ...storedBudgets, tokens: 10 } },
    { budgets: { ...storedBudgets, durationMs: 60_000 } },
    { budgets: { ...storedBudgets, daily: { runs: 1, costUsd: 2, tokens: 10 } } },
    { tier: "internal", allow: ["write_file"] },
  ].map((body) => ({
    name: `PATCH ${JSON.stringify(body)}`,
    setup: [existing],
    method: "PATCH",
    path: "/callers/alice",
    body,
    status: 200,
  })),
  {
    name: "PATCH a webhook's events to fewer",
    setup: [hook],
    method: "PATCH",
    path: "/callers/gh",
    body: { eventFilter: ["issues.opened"] },
    status: 200,
  },
  {
    name: "revoke",
    setup: [existing],
    method: "POST",
    path: "/callers/alice/revoke",
    body: {},
    status: 200,
  },
  {
    // Merged over the defaults: naming one daily cap lowers it and keeps the others.
    name: "a new caller with one daily cap lowered",
    setup: [],
    method: "POST",
    path: "/callers",
    body: { name: "bob", kind: "peer", budgets: { daily: { runs: 5 } } },
    status: 201,
  },
  {
    name: "a new caller at the floor",
    setup: [],
    method: "POST",
    path: "/callers",
    body: { name: "bob", kind: "peer", approvalPolicy: "read-only" },
    status: 201,
  },
  {
    name: "rotate a caller at the floor",
    setup: [{ name: "bob", kind: "peer" }],
    method: "POST",
    path: "/callers/bob/rotate",
    status: 200,
  },
];

describeEachDatabase("admin API: widening needs the operator", (db) => {
  let app: TestApp;
  beforeEach(async () => {
    app = await createTestApp(db.database);
  });
  afterEach(() => app.close());

  const json = async (res: Response) => ({ status: res.status, body: (await res.json()) as Json });
  const setUp = async (c: Omit<Case, "fields">) => {
    for (const caller of c.setup) {
      expect((await operatorRequest(app, "POST", "/callers", caller)).status).toBe(201);
    }
    if (c.revokeFirst) await adminRequest(app, "POST", `/callers/${c.revokeFirst}/revoke`, {});
  };
  const state = async () => json(await adminRequest(app, "GET", "/callers"));

  for (const c of widenings) {
    it(`${c.name}: admin token alone → 403 naming the operator token; with it → applied`, async () => {
      await setUp(c);
      const before = await state();

      const refused = await json(await adminRequest(app, c.method, c.path, c.body));
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe("operator-token-required");
      expect(refused.body.detail).toContain("X-Peergate-Operator-Token");
      expect(refused.body.detail).toContain("peergate operator-token create");
      expect(refused.body.problems.map((p: Json) => p.field)).toEqual(
        expect.arrayContaining(c.fields),
      );
      expect(await state()).toEqual(before);
      const audit = await json(await adminRequest(app, "GET", "/audit?kind=auth.failed"));
      expect(audit.body.events.at(-1)?.data ?? audit.body.events[0]?.data).toMatchObject({
        surface: "operator",
        reason: "operator-token-missing",
      });

      // A wrong operator token is the same 401 as every bad credential, and changes nothing.
      const wrong = await adminRequest(app, c.method, c.path, c.body, {
        "x-peergate-operator-token": "pgo_not-the-operator-token",
      });
      expect(wrong.status).toBe(401);
      expect(await state()).toEqual(before);

      const applied = await json(await operatorRequest(app, c.method, c.path, c.body));
      expect(applied.status, JSON.stringify(applied.body)).toBe(c.status);
      expect(await state()).not.toEqual(before);
    });
  }

  for (const c of narrowings) {
    it(`${c.name}: the admin token alone suffices`, async () => {
      await setUp(c);
      const res = await json(await adminRequest(app, c.method, c.path, c.body));
      expect(res.status, JSON.stringify(res.body)).toBe(c.status);
    });
  }

  it("judges the stored caller, not the request: resending the current values with one raise is refused", async () => {
    await setUp({ name: "", setup: [existing], method: "", path: "", status: 0 });
    const { name: _, kind: __, ...fields } = existing;
    const res = await json(
      await adminRequest(app, "PATCH", "/callers/alice", {
        ...fields,
        budgets: storedBudgets,
        tier: "private",
      }),
    );
    expect(res.status).toBe(403);
    expect(res.body.problems.map((p: Json) => p.field)).toEqual(["tier"]);
    // A narrowing PATCH ignores an operator token it does not need, even a stale one.
    const narrowed = await adminRequest(
      app,
      "PATCH",
      "/callers/alice",
      { tier: "public" },
      {
        "x-peergate-operator-token": "pgo_stale",
      },
    );
    expect(narrowed.status).toBe(200);
  });

  it("a new caller that names one daily cap keeps the other default caps", async () => {
    const res = await json(
      await adminRequest(app, "POST", "/callers", {
        name: "bob",
        kind: "peer",
        budgets: { daily: { runs: 5 } },
      }),
    );
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.caller.budgets).toEqual({
      ...defaultBudgets,
      daily: { ...defaultBudgets.daily, runs: 5 },
    });
  });
});
