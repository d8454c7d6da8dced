// The rule that decides which admin writes need the operator token, as a table: each row is one
// change, and says which fields it widens (none: the admin token alone suffices).
import { describe, expect, it } from "vitest";
import type { CallerJwtSettings } from "../../src/db/schema.ts";
import { defaultBudgets } from "../../src/services/caller-input.ts";
import {
  type AuthorityFields,
  describeWidening,
  floorCaller,
} from "../../src/services/widening.ts";

const base: AuthorityFields = {
  tier: "internal",
  allow: ["write_file"],
  approvalPolicy: "low-risk",
  budgets: { tokens: 1000, costUsd: 1, steps: 10, daily: { runs: 5, costUsd: 2 } },
  promptTemplate: "Summarise {{payload}}",
  eventFilter: ["issues"],
  jwt: null,
};

const jwt: CallerJwtSettings = {
  issuer: "https://peer.example",
  audience: "peergate",
  algorithms: ["ES256"],
  maxAgeSeconds: 300,
  jwksUrl: "https://peer.example/jwks.json",
};

const widening: [string, Partial<AuthorityFields>, string[]][] = [
  ["tier internal → private", { tier: "private" }, ["tier"]],
  ["an allow entry added", { allow: ["write_file", "execute_command"] }, ["allow"]],
  ["an allow entry swapped for another", { allow: ["execute_command"] }, ["allow"]],
  ["an allow entry naming no tool yet", { allow: ["write_file", "future_tool"] }, ["allow"]],
  ["approval low-risk → auto", { approvalPolicy: "auto" }, ["approvalPolicy"]],
  ["approval low-risk → high-risk", { approvalPolicy: "high-risk" }, ["approvalPolicy"]],
  ["a budget raised", { budgets: { ...base.budgets, tokens: 2000 } }, ["budgets.tokens"]],
  [
    "a budget removed (unlimited)",
    { budgets: { costUsd: 1, steps: 10, daily: { runs: 5, costUsd: 2 } } },
    ["budgets.tokens"],
  ],
  [
    "a daily budget raised",
    { budgets: { ...base.budgets, daily: { runs: 50, costUsd: 2 } } },
    ["budgets.daily.runs"],
  ],
  [
    "daily replaced by a partial object (drops a cap)",
    { budgets: { ...base.budgets, daily: { runs: 5 } } },
    ["budgets.daily.costUsd"],
  ],
  [
    "daily removed",
    { budgets: { tokens: 1000, costUsd: 1, steps: 10 } },
    ["budgets.daily.costUsd", "budgets.daily.runs"],
  ],
  ["a new prompt template", { promptTemplate: "Do what {{payload}} says" }, ["promptTemplate"]],
  ["an event added", { eventFilter: ["issues", "push"] }, ["eventFilter"]],
  ["the event filter removed (every event)", { eventFilter: null }, ["eventFilter"]],
  ["JWTs accepted where they were not", { jwt }, ["jwt"]],
  [
    "several at once",
    { tier: "private", allow: [], approvalPolicy: "auto" },
    ["tier", "approvalPolicy"],
  ],
];

const narrowing: [string, Partial<AuthorityFields>][] = [
  ["nothing changes", {}],
  ["tier internal → public", { tier: "public" }],
  ["tier → none", { tier: "none" }],
  ["an allow entry removed", { allow: [] }],
  ["approval low-risk → read-only", { approvalPolicy: "read-only" }],
  ["a budget lowered", { budgets: { ...base.budgets, tokens: 10 } }],
  ["a budget added where there was none", { budgets: { ...base.budgets, durationMs: 5000 } }],
  ["a daily budget lowered", { budgets: { ...base.budgets, daily: { runs: 1, costUsd: 2 } } }],
  ["the prompt template kept", { promptTemplate: base.promptTemplate }],
  ["an event narrowed within its group", { eventFilter: ["issues.opened"] }],
  ["the event filter narrowed to nothing", { eventFilter: [] }],
];

describe("describeWidening", () => {
  for (const [name, change, fields] of widening) {
    it(`widens: ${name} → ${fields.join(", ")}`, () => {
      const widened = describeWidening(base, { ...base, ...change });
      expect(widened.map((w) => w.field)).toEqual(fields);
      for (const w of widened) expect(w.message).toMatch(new RegExp(`^${w.field}`));
    });
  }
  for (const [name, change] of narrowing) {
    it(`does not widen: ${name}`, () => {
      expect(describeWidening(base, { ...base, ...change })).toEqual([]);
    });
  }

  it("judges a JWT change by what it trusts", () => {
    const before = { ...base, jwt };
    const cases: [Partial<CallerJwtSettings>, boolean][] = [
      [{ jwksUrl: "https://attacker.example/jwks.json" }, true],
      [{ issuer: "https://other.example" }, true],
      [{ audience: "other" }, true],
      [{ algorithms: ["ES256", "RS256"] }, true],
      [{ maxAgeSeconds: 3600 }, true],
      [{ maxAgeSeconds: 60 }, false],
      [{}, false],
    ];
    for (const [change, widens] of cases) {
      const after = { ...base, jwt: { ...jwt, ...change } };
      expect(describeWidening(before, after).length > 0, JSON.stringify(change)).toBe(widens);
    }
    expect(describeWidening(before, { ...base, jwt: null })).toEqual([]);
  });

  it("at the floor, nothing steers: template, events and JWT of a public caller with no allow entries", () => {
    const floor = { ...floorCaller, tier: "public" as const };
    const after = { ...floor, promptTemplate: "x {{payload}}", eventFilter: null, jwt };
    expect(describeWidening(floor, after)).toEqual([]);
    // The same change for a caller with an acting tool needs the operator.
    const acting = { ...floor, allow: ["write_file"] };
    expect(
      describeWidening(acting, { ...acting, promptTemplate: "x {{payload}}", jwt }).map(
        (w) => w.field,
      ),
    ).toEqual(["promptTemplate", "jwt"]);
  });

  it("judges creation against the floor: only more than public, no allow, default budgets widens", () => {
    expect(describeWidening(floorCaller, floorCaller)).toEqual([]);
    expect(describeWidening(floorCaller, { ...floorCaller, approvalPolicy: "read-only" })).toEqual(
      [],
    );
    expect(
      describeWidening(floorCaller, {
        ...floorCaller,
        budgets: { ...defaultBudgets, tokens: 1 },
      }),
    ).toEqual([]);
    const fields = describeWidening(floorCaller, {
      ...floorCaller,
      tier: "internal",
      allow: ["web_fetch"],
      budgets: { ...defaultBudgets, costUsd: 100 },
    }).map((w) => w.field);
    expect(fields).toEqual(["tier", "allow", "budgets.costUsd"]);
  });

  it("a restore always widens: from tier none to any tier", () => {
    for (const tier of ["public", "internal", "private"] as const) {
      expect(
        describeWidening({ ...floorCaller, tier: "none" }, { ...floorCaller, tier }).map(
          (w) => w.field,
        ),
      ).toEqual(["tier"]);
    }
  });
});
