// Per-tool overrides, safety overrides and allowlist coverage against the approval policy
// (DESIGN §10): every cell of policy × risk × override × safety × coverage, the caller/agent
// combination, nobody-there, and invariants no combination may break.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type CallAction,
  type CallDecisionInput,
  decideCall,
  resolveNobodyThere,
} from "../../src/gate/resolve.ts";
import {
  type ApprovalPolicy,
  approvalPolicyLevels,
  defaultNobodyThere,
  readToolOverride,
  resolveToolOverride,
  type ToolOverride,
  toolOverrideValues,
} from "../../src/policy/overrides.ts";
import { type Risk, riskLevels } from "../../src/policy/tools.ts";

const letter: Record<CallAction, string> = { run: "R", park: "P", refuse: "X" };
const overridesInOrder = [undefined, "allow", "prompt", "deny"] as const;

// For each policy and risk, four strings: [no safety + not covered, no safety + covered,
// safety + not covered, safety + covered]; each string's letters are the outcome with no override,
// `allow`, `prompt`, `deny`. R runs, P parks, X refuses.
const grid: Record<ApprovalPolicy, Record<Risk, readonly [string, string, string, string]>> = {
  auto: {
    "read-only": ["RRPX", "RRPX", "RRPX", "RRPX"],
    "low-risk": ["RRPX", "RRPX", "RRPX", "RRPX"],
    "high-risk": ["RRPX", "RRPX", "RRPX", "RRPX"],
    unknown: ["RRPX", "RRPX", "RRPX", "RRPX"],
  },
  "read-only": {
    "read-only": ["RRPX", "RRPX", "PPPX", "PPPX"],
    "low-risk": ["PRPX", "RRPX", "PPPX", "PPPX"],
    "high-risk": ["PRPX", "RRPX", "PPPX", "PPPX"],
    unknown: ["PRPX", "RRPX", "PPPX", "PPPX"],
  },
  "low-risk": {
    "read-only": ["RRPX", "RRPX", "PPPX", "PPPX"],
    "low-risk": ["RRPX", "RRPX", "PPPX", "PPPX"],
    "high-risk": ["PRPX", "RRPX", "PPPX", "PPPX"],
    unknown: ["PRPX", "RRPX", "PPPX", "PPPX"],
  },
  "high-risk": {
    "read-only": ["RRPX", "RRPX", "PPPX", "PPPX"],
    "low-risk": ["RRPX", "RRPX", "PPPX", "PPPX"],
    "high-risk": ["RRPX", "RRPX", "PPPX", "PPPX"],
    unknown: ["PRPX", "RRPX", "PPPX", "PPPX"],
  },
};

const safety = { reason: "the command looks like rm -rf on a path outside the workspace" };

function outcome(input: Omit<CallDecisionInput, "tool">): string {
  return letter[decideCall({ tool: "execute_command", ...input }).action];
}

describe("decideCall: the full table", () => {
  const cells: Array<[ApprovalPolicy, Risk, boolean, boolean]> = [];
  for (const policy of approvalPolicyLevels) {
    for (const risk of riskLevels) {
      for (const withSafety of [false, true]) {
        for (const covered of [false, true]) cells.push([policy, risk, withSafety, covered]);
      }
    }
  }

  it.each(cells)(
    "policy %s, risk %s, safety %s, covered %s",
    (policy, risk, withSafety, covered) => {
      const column = (withSafety ? 2 : 0) + (covered ? 1 : 0);
      const expected = grid[policy][risk][column];
      for (const placement of ["caller", "agent"] as const) {
        const got = overridesInOrder
          .map((value) =>
            outcome({
              policy,
              risk,
              covered,
              safety: withSafety ? safety : undefined,
              overrides: value === undefined ? undefined : { [placement]: value },
            }),
          )
          .join("");
        expect(got, `override on the ${placement}`).toBe(expected);
      }
    },
  );
});

describe("decideCall: reasons a person can read", () => {
  it("names the override, its source and the tool when deny refuses", () => {
    const d = decideCall({
      tool: "write_file",
      policy: "auto",
      risk: "high-risk",
      overrides: { agent: "deny" },
    });
    expect(d).toMatchObject({ action: "refuse", rule: "override-deny" });
    expect(d.reason).toContain("agent-wide override");
    expect(d.reason).toContain('"write_file"');
    expect(d.reason).toContain("deny");
  });

  it("names the safety reason when a safety override parks, even over allow and coverage", () => {
    const d = decideCall({
      tool: "execute_command",
      policy: "low-risk",
      risk: "read-only",
      overrides: { caller: "allow" },
      covered: true,
      safety,
    });
    expect(d).toMatchObject({ action: "park", rule: "safety" });
    expect(d.reason).toContain(safety.reason);
  });

  it("records the safety reason under auto even though the call runs", () => {
    const d = decideCall({ tool: "execute_command", policy: "auto", risk: "unknown", safety });
    expect(d).toMatchObject({ action: "run", rule: "auto" });
    expect(d.reason).toContain(safety.reason);
  });

  it("parks under auto on a caller's prompt override and names the safety reason too", () => {
    const d = decideCall({
      tool: "execute_command",
      policy: "auto",
      risk: "unknown",
      overrides: { caller: "prompt" },
      safety,
    });
    expect(d).toMatchObject({ action: "park", rule: "override-prompt" });
    expect(d.reason).toContain("even under auto");
    expect(d.reason).toContain(safety.reason);
  });

  it("names the allowlist entry that covered a command", () => {
    const d = decideCall({
      tool: "execute_command",
      policy: "read-only",
      risk: "unknown",
      covered: true,
      coveredBy: "git status",
    });
    expect(d).toMatchObject({ action: "run", rule: "allowlist" });
    expect(d.reason).toContain('"git status"');
  });

  it("says the policy's level and the call's risk when the policy parks or admits", () => {
    const parks = decideCall({ tool: "write_file", policy: "read-only", risk: "high-risk" });
    expect(parks).toMatchObject({ action: "park", rule: "policy-parks" });
    expect(parks.reason).toBe(
      "The call is high-risk and the approval policy read-only runs calls up to read-only without asking.",
    );
    const unknown = decideCall({ tool: "execute_command", policy: "high-risk", risk: "unknown" });
    expect(unknown.reason).toContain("risk is unknown");
    const admits = decideCall({ tool: "read_file", policy: "read-only", risk: "read-only" });
    expect(admits).toMatchObject({ action: "run", rule: "policy-admits" });
  });

  it("keeps control characters in a tool name visible in the reason", () => {
    const d = decideCall({
      tool: "x\u202eevil",
      policy: "auto",
      risk: "read-only",
      overrides: { caller: "deny" },
    });
    expect(d.reason).not.toContain("\u202e");
    expect(d.reason).toContain("\\u{202e}");
  });
});

describe("decideCall: values outside the types", () => {
  it("parks under a policy it does not know, and on a risk it does not know", () => {
    for (const policy of ["yolo", "", "AUTO", "high"]) {
      const d = decideCall({
        tool: "write_file",
        policy: policy as ApprovalPolicy,
        risk: "read-only",
      });
      expect(d.action, policy).toBe("park");
    }
    const d = decideCall({ tool: "x", policy: "high-risk", risk: "safe" as Risk });
    expect(d.action).toBe("park");
  });
});

describe("caller and agent-wide overrides", () => {
  // The stricter wins: deny > prompt > allow. Rows: caller; columns: agent (none, allow, prompt, deny).
  const combined: Record<string, string> = {
    none: "-apd",
    allow: "aapd",
    prompt: "pppd",
    deny: "dddd",
  };
  const short: Record<ToolOverride, string> = { allow: "a", prompt: "p", deny: "d" };

  it.each(Object.keys(combined))("caller %s against every agent-wide value", (callerKey) => {
    const caller = callerKey === "none" ? undefined : callerKey;
    const got = overridesInOrder
      .map((agent) => {
        const r = resolveToolOverride({ caller, agent });
        return r === undefined ? "-" : short[r.value];
      })
      .join("");
    expect(got).toBe(combined[callerKey]);
  });

  it("an agent-wide prompt is not undone by a caller's allow", () => {
    const d = decideCall({
      tool: "execute_command",
      policy: "read-only",
      risk: "unknown",
      overrides: { caller: "allow", agent: "prompt" },
    });
    expect(d).toMatchObject({ action: "park", rule: "override-prompt" });
    expect(d.reason).toContain("agent-wide");
  });

  it("reads a value that is not allow, deny or prompt as deny", () => {
    for (const bad of ["Allow", "yes", "", 1, true, {}]) {
      const r = resolveToolOverride({ caller: bad });
      expect(r).toEqual({ value: "deny", from: "caller", unrecognised: true });
      const d = decideCall({
        tool: "read_file",
        policy: "auto",
        risk: "read-only",
        overrides: { caller: bad },
      });
      expect(d.action).toBe("refuse");
      expect(d.reason).toContain("read as deny");
    }
  });

  it("reads overrides from a map by own property only", () => {
    const map = JSON.parse('{"__proto__": "allow", "read_file": "deny"}') as Record<
      string,
      unknown
    >;
    expect(readToolOverride(map, "__proto__")).toBe("allow");
    expect(readToolOverride(map, "read_file")).toBe("deny");
    expect(readToolOverride(map, "constructor")).toBeUndefined();
    expect(readToolOverride(map, "toString")).toBeUndefined();
    expect(readToolOverride(undefined, "read_file")).toBeUndefined();
  });
});

describe("nobody there: park or decline", () => {
  it("defaults to decline for webhook kinds and park for peers", () => {
    expect(defaultNobodyThere("peer")).toBe("park");
    expect(defaultNobodyThere("github")).toBe("decline");
    expect(defaultNobodyThere("ifttt")).toBe("decline");
    expect(defaultNobodyThere("webhook")).toBe("decline");
    // A kind added later without a decision here is nobody waiting: declined.
    expect(defaultNobodyThere("something-new" as "peer")).toBe("decline");
  });

  it("turns a parking call into a refusal naming what would fix it, under decline", () => {
    const decision = decideCall({ tool: "execute_command", policy: "read-only", risk: "unknown" });
    const settled = resolveNobodyThere(decision, "decline", "execute_command");
    expect(settled.action).toBe("decline");
    if (settled.action !== "decline") throw new Error("unreachable");
    expect(settled.modelMessage).toContain('"execute_command" was not run');
    expect(settled.modelMessage).toContain("allowlist entry");
    expect(settled.modelMessage).toContain("allow override");
    expect(settled.modelMessage).toContain("park");
    expect(settled.reason).toContain(decision.reason);
  });

  it("says no allowlist or override lifts a safety check", () => {
    const decision = decideCall({
      tool: "execute_command",
      policy: "low-risk",
      risk: "read-only",
      safety,
    });
    const settled = resolveNobodyThere(decision, "decline", "execute_command");
    if (settled.action !== "decline") throw new Error("expected a decline");
    expect(settled.modelMessage).toContain(safety.reason);
    expect(settled.modelMessage).toContain("no allowlist entry or override lifts this check");
  });

  it("names the prompt override when that is what parks", () => {
    const decision = decideCall({
      tool: "web_fetch",
      policy: "auto",
      risk: "read-only",
      overrides: { caller: "prompt" },
    });
    const settled = resolveNobodyThere(decision, "decline", "web_fetch");
    if (settled.action !== "decline") throw new Error("expected a decline");
    expect(settled.modelMessage).toContain('removing the prompt override for "web_fetch"');
  });

  it("leaves run, refuse and (under park) park unchanged", () => {
    const run = decideCall({ tool: "read_file", policy: "read-only", risk: "read-only" });
    const refuse = decideCall({
      tool: "read_file",
      policy: "read-only",
      risk: "read-only",
      overrides: { agent: "deny" },
    });
    const park = decideCall({ tool: "write_file", policy: "read-only", risk: "high-risk" });
    expect(resolveNobodyThere(run, "decline", "read_file")).toBe(run);
    expect(resolveNobodyThere(refuse, "decline", "read_file")).toBe(refuse);
    expect(resolveNobodyThere(park, "park", "write_file")).toBe(park);
  });
});

describe("decideCall: invariants", () => {
  const severity: Record<CallAction, number> = { run: 0, park: 1, refuse: 2 };
  const override = fc.constantFrom<ToolOverride | undefined>(undefined, ...toolOverrideValues);
  const input = fc.record({
    tool: fc.constantFrom("execute_command", "write_file", "web_fetch"),
    policy: fc.constantFrom(...approvalPolicyLevels),
    risk: fc.constantFrom(...riskLevels),
    overrides: fc.record({ caller: override, agent: override }),
    safety: fc.option(fc.record({ reason: fc.string({ minLength: 1 }) }), { nil: undefined }),
    covered: fc.boolean(),
  });
  // From most to least permissive.
  const policyOrder: readonly ApprovalPolicy[] = ["auto", "high-risk", "low-risk", "read-only"];
  const overrideOrder: readonly (ToolOverride | undefined)[] = [
    "allow",
    undefined,
    "prompt",
    "deny",
  ];

  it("deny (caller or agent-wide) always refuses, and nothing else refuses", () => {
    fc.assert(
      fc.property(input, (i) => {
        const denied = i.overrides.caller === "deny" || i.overrides.agent === "deny";
        expect(decideCall(i).action === "refuse").toBe(denied);
      }),
    );
  });

  it("an uncovered call without an allow override is never milder than the policy", () => {
    fc.assert(
      fc.property(input, (i) => {
        const effective = resolveToolOverride(i.overrides)?.value;
        fc.pre(!i.covered && effective !== "allow");
        const baseline = decideCall({ tool: i.tool, policy: i.policy, risk: i.risk });
        expect(severity[decideCall(i).action]).toBeGreaterThanOrEqual(severity[baseline.action]);
      }),
    );
  });

  it("a safety override never runs, except under auto without prompt or deny", () => {
    fc.assert(
      fc.property(input, (i) => {
        fc.pre(i.safety !== undefined);
        const effective = resolveToolOverride(i.overrides)?.value;
        const mayRun = i.policy === "auto" && effective !== "prompt" && effective !== "deny";
        expect(decideCall(i).action === "run").toBe(mayRun);
      }),
    );
  });

  it("a stricter policy, a stricter override or a safety override is never milder", () => {
    fc.assert(
      fc.property(
        input,
        fc.nat(3),
        fc.nat(3),
        fc.constantFrom("caller", "agent"),
        (i, a, b, side) => {
          const base = severity[decideCall(i).action];
          const policyIndex = policyOrder.indexOf(i.policy);
          const stricterPolicy = policyOrder[Math.max(policyIndex, a)] ?? i.policy;
          expect(
            severity[decideCall({ ...i, policy: stricterPolicy }).action],
          ).toBeGreaterThanOrEqual(base);
          const current = overrideOrder.indexOf(i.overrides[side]);
          const stricter = overrideOrder[Math.max(current, b)];
          const narrowed = { ...i, overrides: { ...i.overrides, [side]: stricter } };
          expect(severity[decideCall(narrowed).action]).toBeGreaterThanOrEqual(base);
          const flagged = { ...i, safety: { reason: "flagged" } };
          expect(severity[decideCall(flagged).action]).toBeGreaterThanOrEqual(base);
        },
      ),
    );
  });

  it("coverage only ever lets a call run that would otherwise park by policy", () => {
    fc.assert(
      fc.property(input, (i) => {
        const without = decideCall({ ...i, covered: false });
        const withCoverage = decideCall({ ...i, covered: true });
        if (without.action !== withCoverage.action) {
          expect(without.rule).toBe("policy-parks");
          expect(withCoverage).toMatchObject({ action: "run", rule: "allowlist" });
        }
      }),
    );
  });

  it("always gives a reason, and decline never lets a call run", () => {
    fc.assert(
      fc.property(
        input,
        fc.constantFrom("park", "decline") as fc.Arbitrary<"park" | "decline">,
        (i, mode) => {
          const d = decideCall(i);
          expect(d.reason.length).toBeGreaterThan(10);
          const settled = resolveNobodyThere(d, mode, i.tool);
          if (d.action !== "run") expect(settled.action).not.toBe("run");
          if (mode === "park") expect(settled).toBe(d);
        },
      ),
    );
  });
});

describe("purity", () => {
  it("overrides.ts and url-grants.ts import nothing with side effects", async () => {
    const { readFile } = await import("node:fs/promises");
    for (const file of ["overrides.ts", "url-grants.ts"]) {
      const source = await readFile(new URL(`../../src/policy/${file}`, import.meta.url), "utf8");
      const imports = [...source.matchAll(/^import\s[^;]*?from\s+"([^"]+)";/gmsu)].map((m) => m[1]);
      expect(imports.length, file).toBeGreaterThan(0);
      // src/domain/ holds the domain words and is as pure as policy/ (biome.json enforces both).
      for (const from of imports)
        expect(from, `${file} imports ${from}`).toMatch(/^\.\/|^\.\.\/errors\.ts$|^\.\.\/domain\//);
    }
  });
});
