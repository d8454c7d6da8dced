// The precise controls as an admin and an operator write them (DESIGN §10): every bad value is
// refused with an error naming the field, the value and the fix; adding an entry, an allow
// override or a grant widens (needs the operator token), removing one narrows; and a run combines
// what it started with and what its caller has now, the stricter side winning.
import { describe, expect, it } from "vitest";
import type { Caller } from "../../src/db/schema.ts";
import { ValidationError } from "../../src/errors.ts";
import { narrowSnapshot, stricterPolicy } from "../../src/gate/controls.ts";
import { parseAgentPolicy } from "../../src/policy/policy-files.ts";
import {
  createCallerSchema,
  parseInput,
  updateCallerSchema,
} from "../../src/services/caller-input.ts";
import { describeWidening, floorCaller } from "../../src/services/widening.ts";

function problemsOf(input: Record<string, unknown>): string[] {
  try {
    parseInput(updateCallerSchema, input);
  } catch (error) {
    if (error instanceof ValidationError) return error.problems.map((p) => p.message);
    throw error;
  }
  return [];
}

describe("caller control fields are validated with field, value and fix", () => {
  const rows: [string, Record<string, unknown>, string[]][] = [
    ["a command with a pipe", { commands: ["git log | sh"] }, ["commands.0:", '"git log | sh"']],
    ["three words", { commands: ["git remote add"] }, ["commands.0:", "at most two words"]],
    ["a flag as subcommand", { commands: ["git --version"] }, ["commands.0:", "not a flag"]],
    ["double space", { commands: ["git  status"] }, ["commands.0:", "single spaces"]],
    ["a substitution", { commands: ["echo $(id)"] }, ["commands.0:", "shell syntax"]],
    ["a look-alike letter", { commands: ["g\u0456t status"] }, ["commands.0:", "printable ASCII"]],
    ["not a list", { commands: "git status" }, ["commands:", '"git status"']],
    [
      "an unknown override",
      { toolOverrides: { ls: "yes" } },
      ["toolOverrides.ls:", '"yes"', "allow, deny, prompt"],
    ],
    ["a bad tool name", { toolOverrides: { "a b": "deny" } }, ["toolOverrides.a b:", "tool name"]],
    ["overrides not a map", { toolOverrides: ["ls"] }, ["toolOverrides:", "mapping"]],
    [
      "a wildcard host",
      { urlGrants: { hosts: ["*.example.com"] } },
      ["urlGrants.hosts.0:", "*.example.com"],
    ],
    [
      "a one-label suffix",
      { urlGrants: { suffixes: [".com"] } },
      ["urlGrants.suffixes.0:", ".com"],
    ],
    [
      "a prefix with userinfo",
      { urlGrants: { prefixes: ["https://a@example.com/"] } },
      ["urlGrants.prefixes.0:"],
    ],
    [
      "an unknown grant list",
      { urlGrants: { domains: ["example.com"] } },
      ["urlGrants:", "domains"],
    ],
    ["an unknown mode", { whenNobody: "wait" }, ["whenNobody:", '"wait"', "park, decline"]],
  ];
  it.each(rows)("%s", (_what, input, parts) => {
    const problems = problemsOf(input);
    expect(problems.length, JSON.stringify(problems)).toBeGreaterThan(0);
    for (const part of parts) expect(problems.join("\n")).toContain(part);
  });

  it("accepts good values, and a create defaults to no controls", () => {
    expect(
      problemsOf({
        commands: ["git status", "git log", "npx jest", "sudo apt"],
        toolOverrides: { execute_command: "prompt", ls: "allow", __proto__: "deny" },
        urlGrants: {
          hosts: ["example.com"],
          suffixes: [".example.org"],
          prefixes: ["https://x.io/docs"],
        },
        whenNobody: "decline",
      }),
    ).toEqual([]);
    const created = parseInput(createCallerSchema, { name: "a", kind: "peer" });
    expect(created).toMatchObject({ commands: [], toolOverrides: {} });
    expect(created.urlGrants).toBeUndefined();
    // A `__proto__` key is a tool name like any other, never a prototype.
    const parsed = parseInput(
      updateCallerSchema,
      JSON.parse('{"toolOverrides":{"__proto__":"deny"}}'),
    );
    expect(Object.hasOwn(parsed.toolOverrides ?? {}, "__proto__")).toBe(true);
  });
});

describe("agent.yaml carries commands, toolOverrides, urlGrants and webFetch", () => {
  const base = "name: a\ndescription: d\nversion: '1'\n";
  it("parses good values", () => {
    const policy = parseAgentPolicy(
      `${base}commands: [git status]\ntoolOverrides: { write_file: prompt }\nurlGrants: { hosts: [example.com] }\nwebFetch: { denyHosts: [evil.example] }\n`,
      "agent.yaml",
    );
    expect(policy.commands).toEqual(["git status"]);
    expect(policy.toolOverrides).toEqual({ write_file: "prompt" });
    expect(policy.urlGrants?.hosts).toEqual(["example.com"]);
    expect(policy.webFetch?.denyHosts).toEqual(["evil.example"]);
  });
  it.each([
    ["commands: [git status && ls]", "commands"],
    ["toolOverrides: { ls: maybe }", "toolOverrides"],
    ["urlGrants: { suffixes: [.com] }", "urlGrants"],
    ["webFetch: { hosts: [a.com] }", "webFetch"],
  ])("refuses %s", (line, field) => {
    expect(() => parseAgentPolicy(`${base}${line}\n`, "agent.yaml")).toThrow(field);
  });
});

describe("adding a control widens, removing one narrows", () => {
  const at = (fields: Partial<typeof floorCaller>) => ({ ...floorCaller, ...fields });
  const rows: [string, Partial<typeof floorCaller>, Partial<typeof floorCaller>, string[]][] = [
    ["a new command entry", {}, { commands: ["git status"] }, ["commands"]],
    ["removing a command entry", { commands: ["git status"] }, {}, []],
    ["an allow override", {}, { toolOverrides: { ls: "allow" } }, ["toolOverrides.ls"]],
    [
      "deny → prompt",
      { toolOverrides: { ls: "deny" } },
      { toolOverrides: { ls: "prompt" } },
      ["toolOverrides.ls"],
    ],
    [
      "removing a deny",
      { toolOverrides: { ls: "deny" } },
      { toolOverrides: {} },
      ["toolOverrides.ls"],
    ],
    ["a new deny", {}, { toolOverrides: { ls: "deny" } }, []],
    ["removing an allow", { toolOverrides: { ls: "allow" } }, { toolOverrides: {} }, []],
    ["a new URL grant", {}, { urlGrants: { hosts: ["example.com"] } }, ["urlGrants.hosts"]],
    [
      "another host",
      { urlGrants: { hosts: ["a.com"] } },
      { urlGrants: { hosts: ["a.com", "b.com"] } },
      ["urlGrants.hosts"],
    ],
    [
      "removing a host",
      { urlGrants: { hosts: ["a.com", "b.com"] } },
      { urlGrants: { hosts: ["a.com"] } },
      [],
    ],
    [
      "removing every grant",
      { urlGrants: { hosts: ["a.com"] } },
      { urlGrants: null },
      ["urlGrants"],
    ],
    ["the classifier turned off", {}, { classifier: "off" }, []],
    ["the classifier on again", { classifier: "off" }, { classifier: "on" }, ["classifier"]],
    ["the classifier left off", { classifier: "off" }, { classifier: "off" }, []],
  ];
  it.each(rows)("%s", (_what, before, after, fields) => {
    expect(describeWidening(at(before), at(after)).map((w) => w.field)).toEqual(fields);
  });
});

describe("a run is held to the stricter of how it started and its caller now", () => {
  const snap = (fields: Partial<ReturnType<typeof narrowSnapshot>>) => ({
    commands: [],
    toolOverrides: {},
    urlGrants: null,
    whenNobody: null,
    ...fields,
  });
  it("commands: a removed entry is gone, a new one never arrives", () => {
    const started = snap({ commands: ["git status", "git log"] });
    expect(narrowSnapshot(started, snap({ commands: ["git status", "rm"] })).commands).toEqual([
      "git status",
    ]);
  });
  it("overrides: a new deny or prompt arrives, a removed one stays, allow needs both", () => {
    const started = snap({ toolOverrides: { a: "deny", b: "allow", c: "allow" } });
    const now = snap({ toolOverrides: { b: "allow", d: "prompt", e: "allow" } });
    expect(narrowSnapshot(started, now).toolOverrides).toEqual({
      a: "deny",
      b: "allow",
      d: "prompt",
    });
  });
  it("grants: intersected; one that appears arrives, one that disappears stays", () => {
    expect(
      narrowSnapshot(
        snap({ urlGrants: { hosts: ["a.com", "b.com"] } }),
        snap({ urlGrants: { hosts: ["b.com", "c.com"] } }),
      ).urlGrants,
    ).toEqual({ hosts: ["b.com"], suffixes: [], prefixes: [] });
    expect(narrowSnapshot(snap({}), snap({ urlGrants: { hosts: ["a.com"] } })).urlGrants).toEqual({
      hosts: ["a.com"],
    });
    expect(narrowSnapshot(snap({ urlGrants: { hosts: ["a.com"] } }), snap({})).urlGrants).toEqual({
      hosts: ["a.com"],
    });
  });
  it("classifier: off when either says so (off applies mid-run, on never reaches the run)", () => {
    expect(narrowSnapshot(snap({}), snap({ classifier: "off" })).classifier).toBe("off");
    expect(narrowSnapshot(snap({ classifier: "off" }), snap({ classifier: "on" })).classifier).toBe(
      "off",
    );
    expect(narrowSnapshot(snap({}), snap({})).classifier).toBe("on");
  });
  it("nobody there: decline when either says so", () => {
    expect(
      narrowSnapshot(snap({ whenNobody: "decline" }), snap({ whenNobody: "park" })).whenNobody,
    ).toBe("decline");
    expect(
      narrowSnapshot(snap({ whenNobody: "park" }), snap({ whenNobody: "decline" })).whenNobody,
    ).toBe("decline");
  });
  it.each([
    ["auto", "read-only", "read-only"],
    ["read-only", "auto", "read-only"],
    ["low-risk", "high-risk", "low-risk"],
    ["high-risk", "auto", "high-risk"],
  ] as const)("policy %s then %s → %s", (a, b, want) => {
    expect(stricterPolicy(a, b)).toBe(want);
  });
  // Caller type used so that the snapshot stays in step with the row.
  const _typed: Pick<Caller, "commands" | "toolOverrides" | "urlGrants" | "whenNobody"> = snap({});
  void _typed;
});
