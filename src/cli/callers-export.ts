// `peergate callers export`: the callers file `callers apply` reads, written from the server. It
// holds no secret (the API never returns one) and round-trips: applying it changes nothing.
import { writeFile } from "node:fs/promises";
import { stringify } from "yaml";
import { managedCallerFields as managedFields } from "../domain/caller.ts";
import { callAdmin } from "./admin-client.ts";
import { type Command, exitCodes } from "./command.ts";

type Json = Record<string, unknown>;

/** One caller as a callers-file entry: name, kind and the managed fields that say something. */
export function toFileEntry(caller: Json): Json {
  const entry: Json = { name: caller.name, kind: caller.kind };
  for (const field of managedFields) {
    const value = caller[field];
    if (value === null || value === undefined) continue;
    entry[field] = value;
  }
  return entry;
}

export function exportCallersYaml(callers: readonly Json[]): string {
  const live = callers.filter((c) => c.revoked !== true);
  const revoked = callers.filter((c) => c.revoked === true).map((c) => String(c.name));
  const header = [
    "# peergate callers, as `peergate callers export` wrote them; `peergate callers apply -f` reads",
    "# this file. It holds no credentials: those are issued by the server and shown once.",
    ...(revoked.length
      ? [
          `# Revoked (left out; \`peergate callers restore\` brings one back): ${revoked.join(", ")}`,
        ]
      : []),
  ].join("\n");
  return `${header}\n${stringify({ callers: live.map(toFileEntry) }, { lineWidth: 0 })}`;
}

export const callersExportCommand: Command = {
  words: ["callers", "export"],
  summary: "write the callers file that `callers apply` reads (no secrets)",
  help: [
    "[-o callers.yaml]",
    "",
    "Writes every caller that is not revoked as the YAML `callers apply -f` reads, to standard",
    "output or to the file -o names (created owner-only). Applying the export changes nothing.",
  ].join("\n"),
  options: { output: { type: "string", short: "o" } },
  async run(args, cli) {
    const listed = (await callAdmin(cli, "listCallers")).callers;
    // Push grants are part of what an operator configures: exported, so apply round-trips them.
    const callers: Json[] = [];
    for (const caller of listed) {
      if (caller.revoked) {
        callers.push(caller);
        continue;
      }
      const { hosts } = await callAdmin(cli, "getPushHosts", { params: { name: caller.name } });
      callers.push(hosts.length > 0 ? { ...caller, pushHosts: hosts } : caller);
    }
    const text = exportCallersYaml(callers);
    if (typeof args.values.output === "string") {
      await writeFile(args.values.output, text, { mode: 0o600 });
      cli.io.out(
        `wrote ${callers.filter((c) => c.revoked !== true).length} caller(s) to ${args.values.output}`,
      );
    } else cli.io.out(text.trimEnd());
    return exitCodes.ok;
  },
};
