// How a caller reads in a terminal: a short summary of what the admin API answered, every value
// that came from outside escaped or quoted, and a new credential printed once. The types are the
// API's own (AdminResponse), so a change of the caller view fails to compile here.
import { quoteUntrusted } from "../policy/quote.ts";
import type { AdminResponse } from "./admin-client.ts";
import type { CliContext } from "./command.ts";
import { escapeForTerminal, toTerminalJson } from "./terminal-text.ts";

/** A caller as the admin API shows it (no secrets). */
export type CallerView = AdminResponse<"getCaller">["caller"];
/** A credential just issued: shown once. */
export type IssuedCredential = AdminResponse<"createCaller">["credential"];

export function describeCaller(c: CallerView): string {
  const active = c.credentials.filter((k) => k.active);
  const e = (text: unknown) => escapeForTerminal(text);
  return [
    `${e(c.name)}  (${e(c.kind)}, version ${e(c.version)})${c.revoked ? "  REVOKED" : ""}`,
    `  tier:      ${e(c.tier)}`,
    `  allow:     ${c.allow.length ? c.allow.map((a) => quoteUntrusted(a)).join(", ") : "(none)"}`,
    `  approval:  ${e(c.approvalPolicy)}`,
    `  budgets:   ${toTerminalJson(c.budgets)}`,
    `  commands:  ${c.commands?.length ? c.commands.map((a) => quoteUntrusted(a)).join(", ") : "(none)"}`,
    `  overrides: ${
      Object.keys(c.toolOverrides ?? {}).length
        ? Object.entries(c.toolOverrides ?? {})
            .map(([t, o]) => `${quoteUntrusted(t)}=${e(o)}`)
            .join(", ")
        : "(none)"
    }`,
    `  grants:    ${
      c.urlGrants
        ? [
            ...(c.urlGrants.hosts ?? []),
            ...(c.urlGrants.suffixes ?? []),
            ...(c.urlGrants.prefixes ?? []),
          ]
            .map((g) => quoteUntrusted(g))
            .join(", ") || "(nothing granted: every fetch asks)"
        : "(none: web_fetch follows the approval policy)"
    }`,
    ...(c.whenNobody ? [`  nobody:    ${e(c.whenNobody)} (a call that needs a person)`] : []),
    ...(c.classifier === "off" ? ["  classifier: off (an uncovered command always asks)"] : []),
    ...(c.promptTemplate !== null ? [`  prompt:    ${quoteUntrusted(c.promptTemplate, 200)}`] : []),
    ...(c.eventFilter ? [`  events:    ${e(c.eventFilter.join(", "))}`] : []),
    `  credentials: ${active.length ? active.map((k) => `${e(k.prefix)}${k.expiresAt ? ` (until ${e(k.expiresAt)})` : ""}`).join(", ") : "none active"}`,
  ].join("\n");
}

export function printCredential(cli: CliContext, credential: IssuedCredential | null): void {
  cli.io.out("");
  if (!credential) {
    cli.io.out("No static token: this peer authenticates only with JWTs signed by its key.");
    return;
  }
  cli.io.out("Credential (shown once; peergate keeps only its hash):");
  cli.io.out(`  ${credential.url ?? credential.secret}`);
  cli.io.out(`  ${credential.usage}`);
}
