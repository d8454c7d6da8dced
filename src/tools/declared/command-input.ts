// What the model may send a declared command tool: only the fields its mode and contracts allow
// (`arguments` unless the contract says none, `program` for structured, `command` for chain,
// `stdin` and `rationale` when declared), each bounded in bytes and free of NUL. The manifest
// field is filled by peergate, so an approval names the declaration it was given for.
import { z } from "zod";
import type { CommandToolPolicy } from "../../policy/policy-files.ts";
import { commandToolLimits } from "./command-prepare.ts";

export type CallInput = {
  program?: string;
  command?: string;
  arguments?: string[];
  stdin?: string;
  rationale?: string;
  manifest: string;
};

function byteBound(max: number, what: string) {
  return z.string().refine((s) => Buffer.byteLength(s) <= max && !s.includes("\0"), {
    error: `${what} of at most ${max} bytes, without NUL`,
  });
}

/** The model's input schema for a tool: only the fields its contracts allow. */
export function buildInputSchema(tool: CommandToolPolicy, manifest: string): z.ZodType {
  const fields: Record<string, z.ZodType> = {};
  const contract = tool.arguments ?? { mode: "optional" as const };
  if (tool.mode !== "chain" && contract.mode !== "none") {
    const maxCount = contract.maxCount ?? commandToolLimits.maxArguments;
    const minCount = contract.minCount ?? (contract.mode === "required" ? 1 : 0);
    const maxItem = contract.maxItemBytes ?? commandToolLimits.maxArgumentBytes;
    const list = z
      .array(byteBound(maxItem, "an argument"))
      .min(minCount)
      .max(maxCount)
      .describe("Arguments, each passed literally as one argv element (no shell parsing).");
    fields.arguments = contract.mode === "required" ? list : list.default([]);
  }
  if (tool.mode === "structured") {
    fields.program = z
      .enum(tool.programs as [string, ...string[]])
      .describe("Which program to run.");
  }
  if (tool.mode === "chain") {
    fields.command = byteBound(
      tool.maxCommandBytes ?? commandToolLimits.maxCommandBytes,
      "a command line",
    ).describe("Plain words joined by |, ;, && or ||. No redirections, $(), variables or globs.");
  }
  const stdin = tool.stdin ?? "none";
  if (stdin !== "none") {
    const field = byteBound(
      tool.maxStdinBytes ?? commandToolLimits.maxStdinBytes,
      "stdin",
    ).describe("Text given to the command on standard input.");
    fields.stdin = stdin === "required" ? field : field.optional();
  }
  const rationale = tool.rationale ?? (tool.mode === "fixed" ? "none" : "optional");
  if (rationale !== "none") {
    const field = byteBound(commandToolLimits.maxRationaleBytes, "a rationale").describe(
      "Why you run this (shown to the operator who approves it; it grants nothing).",
    );
    fields.rationale = rationale === "required" ? field : field.optional();
  }
  fields.manifest = z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .describe("Set by peergate: leave it out.");
  return z.strictObject(fields).transform((input) => ({
    ...input,
    manifest: (input.manifest as string | undefined) ?? manifest,
  }));
}
