// The executor's gate (DESIGN §4) as values.
import { describe, expect, it } from "vitest";
import { computeCeiling } from "../../src/policy/ceiling.ts";
import { checkApprovalRequest, checkToolCall } from "../../src/policy/check-tool-call.ts";
import { effectiveToolSet } from "../../src/policy/effective-set.ts";
import { createInventory } from "../../src/policy/tools.ts";
import { builtinDescriptors as builtinTools } from "../../src/tools/builtin-tools.ts";
import { makeAgent, makeCaller } from "./fixtures.ts";

const built = createInventory(builtinTools, "builtins");
if (!built.ok) throw new Error("built-ins refused");
const inventory = built.inventory;
const agent = makeAgent();
const set = effectiveToolSet(
  inventory,
  agent,
  computeCeiling(inventory, agent, makeCaller({ tier: "public", allow: ["write_file"] })),
);

describe("checkToolCall", () => {
  it("allows a tool in the set, by its name or an alias", () => {
    expect(checkToolCall(set, "write_file", "model")).toMatchObject({
      allowed: true,
      kind: "tool",
      tool: { name: "write_file" },
    });
    expect(checkToolCall(set, "get_time", "model")).toMatchObject({ allowed: true });
  });

  it("refuses a tool outside the set with the same message as a tool that exists nowhere", () => {
    const outside = checkToolCall(set, "edit_file", "model");
    const nowhere = checkToolCall(set, "edit_fil3", "model");
    expect(outside).toEqual({
      allowed: false,
      code: "tool-unavailable",
      message: 'Tool "edit_file" is not available in this run.',
    });
    expect(nowhere).toEqual({
      allowed: false,
      code: "tool-unavailable",
      message: 'Tool "edit_fil3" is not available in this run.',
    });
    // The two messages differ only in the echoed name.
    expect(outside.allowed === false && outside.message.replace("edit_file", "X")).toBe(
      nowhere.allowed === false && nowhere.message.replace("edit_fil3", "X"),
    );
  });

  it("refuses a hidden half named by the model, even though it is in the set", () => {
    expect(set.names.get("execute_write_file")?.kind).toBe("execute-half");
    const check = checkToolCall(set, "execute_write_file", "model");
    expect(check).toMatchObject({ allowed: false, code: "hidden-half" });
    // Same words as for a tool that exists nowhere: the model cannot tell halves exist.
    const nowhere = checkToolCall(set, "execute_nothing", "model");
    expect(check.allowed === false && check.message.replace("execute_write_file", "X")).toBe(
      nowhere.allowed === false && nowhere.message.replace("execute_nothing", "X"),
    );
  });

  it("lets the approval path run a hidden half in the set", () => {
    expect(checkToolCall(set, "execute_write_file", "approval")).toMatchObject({
      allowed: true,
      kind: "execute-half",
      tool: { name: "write_file" },
    });
  });

  it("refuses a hidden half outside the set as unavailable, whoever asks", () => {
    for (const origin of ["model", "approval"] as const) {
      expect(checkToolCall(set, "execute_execute_command", origin)).toMatchObject({
        allowed: false,
        code: "tool-unavailable",
      });
    }
  });

  it("escapes and bounds a hostile name in the message", () => {
    const check = checkToolCall(set, `\u202e${"x".repeat(10_000)}\n`, "model");
    expect(check.allowed).toBe(false);
    if (check.allowed) return;
    expect(check.message).not.toMatch(/[\u202e\n]/);
    expect(check.message).toContain("\\u{202e}");
    expect(check.message.length).toBeLessThan(300);
  });

  it.each(["__proto__", "constructor", "toString", "Write_File", "write_file "])(
    "treats %j as unavailable",
    (name) => {
      expect(checkToolCall(set, name, "model")).toMatchObject({
        allowed: false,
        code: "tool-unavailable",
      });
    },
  );
});

describe("checkApprovalRequest", () => {
  it("honours a request from the tool registered to make it", () => {
    expect(checkApprovalRequest(set, "write_file", "execute_write_file")).toMatchObject({
      allowed: true,
      kind: "execute-half",
      tool: { name: "write_file" },
    });
  });

  it.each([
    ["another tool's half", "get_time", "execute_write_file"],
    ["a half outside the set", "write_file", "execute_edit_file"],
    ["a half of a tool outside the set", "edit_file", "execute_edit_file"],
    ["a plain tool name", "write_file", "write_file"],
    ["the half itself asking", "execute_write_file", "execute_write_file"],
    ["an unknown tool", "mcp.search", "execute_write_file"],
    ["a non-string target", "write_file", { executeToolName: "execute_write_file" }],
    ["a case variant target", "write_file", "Execute_write_file"],
  ])("refuses %s", (_label, from, target) => {
    expect(checkApprovalRequest(set, from, target)).toMatchObject({
      allowed: false,
      code: "approval-not-bound",
    });
  });
});
