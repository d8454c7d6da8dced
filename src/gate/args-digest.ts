// The digest an approval names: SHA-256 of the canonical JSON of the arguments that will run, so
// an operator's answer binds to exactly those arguments and a stale answer cannot approve others.
import { createHash } from "node:crypto";
import { canonicalJson } from "../json-text.ts";

export function digestArgs(args: unknown): string {
  return createHash("sha256")
    .update(canonicalJson(args ?? null))
    .digest("hex");
}
