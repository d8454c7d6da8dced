// Tool descriptors, name rules and the built-in inventory.
import { describe, expect, it } from "vitest";
import {
  checkToolNames,
  createInventory,
  describeTool,
  foldToolName,
  isValidToolName,
  type Risk,
  raiseRisk,
  rankRisk,
  riskLevels,
} from "../../src/policy/tools.ts";
import { builtinDescriptors as builtinTools } from "../../src/tools/builtin-tools.ts";

describe("describeTool", () => {
  it("reads missing metadata as the most restricted values", () => {
    expect(describeTool({ name: "t", category: "mcp" })).toMatchObject({
      risk: "unknown",
      disclosure: "private",
      egress: true,
      aliases: [],
      executeHalf: undefined,
      needsPerson: false,
      persistsOperatorState: false,
    });
  });

  it("reads unrecognised metadata (from an untyped source) as the most restricted values", () => {
    const tool = describeTool({
      name: "t",
      category: "mcp",
      risk: "harmless" as Risk,
      disclosure: "PUBLIC" as never,
      egress: "no" as never,
    });
    expect(tool).toMatchObject({ risk: "unknown", disclosure: "private", egress: true });
  });

  it("keeps declared metadata and names the hidden half execute_<name>", () => {
    expect(
      describeTool({
        name: "deploy",
        category: "custom",
        risk: "high-risk",
        disclosure: "public",
        egress: false,
        twoPhase: true,
      }),
    ).toMatchObject({
      risk: "high-risk",
      disclosure: "public",
      egress: false,
      executeHalf: "execute_deploy",
    });
  });
});

describe("tool names", () => {
  it.each(["a", "read_file", "server.tool", "A-b_c.9", "x".repeat(128)])("accepts %j", (name) => {
    expect(isValidToolName(name)).toBe(true);
  });

  it.each([
    "",
    "x".repeat(129),
    "has space",
    "trailing ",
    "tab\t",
    "zero\u200bwidth",
    "\u202eRTL",
    "\u0430bc", // Cyrillic а
    "ｒｅａｄ", // fullwidth
    "slash/name",
    "new\nline",
  ])("refuses %j", (name) => {
    expect(isValidToolName(name)).toBe(false);
  });

  it("folds case and Unicode compatibility forms together", () => {
    expect(foldToolName("Read_File")).toBe(foldToolName("read_file"));
    expect(foldToolName("ｒｅａｄ_file")).toBe(foldToolName("read_file"));
    expect(foldToolName("\u212Aey")).toBe(foldToolName("key")); // Kelvin sign
    expect(foldToolName("stra\u00dfe")).toBe(foldToolName("STRASSE"));
    expect(foldToolName("\u0430")).not.toBe(foldToolName("a")); // confusable, but not NFKC-equal
  });

  it("refuses names equal up to case or NFKC, with every problem listed", () => {
    const problems = checkToolNames([
      { name: "read_file", where: "first" },
      { name: "Read_File", where: "second" },
      { name: "ｒｅａｄ_file", where: "third" },
      { name: "read_file", where: "fourth" },
      { name: "Shell", where: "fifth" },
    ]);
    expect(problems.map((p) => p.where)).toEqual(["second", "third", "third", "fourth", "fifth"]);
    expect(problems[0]?.message).toMatch(/"read_file" \(first\)/);
    expect(problems[1]?.message).toMatch(/1 to 128 characters/);
    expect(problems[3]?.message).toMatch(/not already used by first/);
    expect(problems[4]?.message).toMatch(/category word/);
  });
});

describe("createInventory", () => {
  it("refuses an alias or a hidden half that collides with another tool's name", () => {
    const result = createInventory(
      [
        describeTool({ name: "find", category: "files", aliases: ["glob"] }),
        describeTool({ name: "GLOB", category: "files" }),
        describeTool({ name: "write", category: "files", twoPhase: true }),
        describeTool({ name: "Execute_Write", category: "files" }),
      ],
      "v",
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map((p) => p.name)).toEqual(["GLOB", "Execute_Write"]);
  });

  it("indexes every name to its tool and kind, exactly as spelled", () => {
    const result = createInventory(builtinTools, "v1");
    if (!result.ok) throw new Error("built-ins refused");
    const { names } = result.inventory;
    expect(names.get("glob")).toMatchObject({ kind: "alias", tool: { name: "find" } });
    expect(names.get("execute_write_file")).toMatchObject({ kind: "execute-half" });
    expect(names.get("Read_file")).toBeUndefined();
    expect(names.get("__proto__")).toBeUndefined();
    expect(Object.isFrozen(result.inventory.tools)).toBe(true);
  });
});

describe("the built-in inventory", () => {
  it("holds the 13 tools of issue 3 with their declared properties", () => {
    const rows = builtinTools.map((t) => [
      t.name,
      t.risk,
      t.disclosure,
      t.egress,
      t.executeHalf ?? null,
      t.aliases.join(","),
      t.needsPerson,
      t.persistsOperatorState,
    ]);
    expect(rows).toEqual([
      ["read_file", "read-only", "private", false, null, "", false, false],
      ["ls", "read-only", "internal", false, null, "", false, false],
      ["find", "read-only", "internal", false, null, "glob", false, false],
      ["grep", "read-only", "private", false, null, "", false, false],
      ["stat", "read-only", "internal", false, null, "", false, false],
      ["get_time", "read-only", "public", false, null, "", false, false],
      ["web_fetch", "read-only", "public", true, null, "", false, false],
      ["write_file", "high-risk", "public", false, "execute_write_file", "", false, false],
      ["edit_file", "high-risk", "private", false, "execute_edit_file", "", false, false],
      ["mkdir", "high-risk", "public", false, null, "", false, false],
      ["execute_command", "unknown", "private", true, "execute_execute_command", "", false, false],
      ["ask_user_question", "read-only", "private", false, null, "", true, false],
      ["manage_memory", "low-risk", "private", false, null, "", false, true],
    ]);
  });

  it("has no colliding names", () => {
    expect(createInventory(builtinTools, "v").ok).toBe(true);
  });
});

describe("the risk order", () => {
  it("is riskLevels' order, unknown highest, and raiseRisk keeps the higher", () => {
    expect(riskLevels.map(rankRisk)).toEqual([0, 1, 2, 3]);
    expect(raiseRisk("read-only", "high-risk")).toBe("high-risk");
    expect(raiseRisk("unknown", "high-risk")).toBe("unknown");
    expect(raiseRisk("low-risk", "read-only")).toBe("low-risk");
    expect(rankRisk("dangerous" as never)).toBe(3);
  });
});
