// `peergate callers add`: create a caller and print its credential once (a bearer token, the
// GitHub webhook secret or the IFTTT URL). `--json` prints exactly what the API returned.
import { quoteUntrusted } from "../policy/quote.ts";
import { type AdminRequestBody, callAdmin } from "./admin-client.ts";
import {
  buildFields,
  callerFields,
  callerFieldsHelp,
  type Json,
  nameOf,
  readJwt,
} from "./callers-options.ts";
import { describeCaller, printCredential } from "./callers-output.ts";
import { type Command, exitCodes, UsageError } from "./command.ts";
import { operatorHeaders } from "./operator-token.ts";
import { toTerminalJson } from "./terminal-text.ts";

export const callersAddCommand: Command = {
  words: ["callers", "add"],
  summary: "create a caller and print its credential once",
  help: [
    "<name> --kind peer|github|ifttt|webhook [options]",
    "",
    "Creates a caller and prints its credential: a bearer token (peer, webhook), the secret to",
    "paste into GitHub's webhook settings (github), or the full URL for the IFTTT applet (ifttt).",
    "A caller created with a tier above public, allow entries or budgets above the defaults needs",
    "the operator token too (PEERGATE_OPERATOR_TOKEN or --operator-token-file).",
    "",
    "Options:",
    "  --kind K          peer, github, ifttt or webhook (required)",
    ...callerFieldsHelp,
    "  --jwt-issuer I    peer: accept JWTs from this issuer (with --jwt-alg, --jwt-audience and",
    "                    one of --jwt-jwks-url URL, --jwt-jwk-file F, --jwt-pem-file F). The",
    "                    audience defaults to peergate; exp, iat and jti are required, and each",
    "                    token is accepted once (docs/operating.md)",
  ].join("\n"),
  positionals: { min: 1, max: 1, names: "a caller name" },
  options: {
    kind: { type: "string" },
    ...callerFields,
    "jwt-issuer": { type: "string" },
    "jwt-audience": { type: "string" },
    "jwt-alg": { type: "string", multiple: true },
    "jwt-jwks-url": { type: "string" },
    "jwt-jwk-file": { type: "string" },
    "jwt-pem-file": { type: "string" },
  },
  async run(args, cli) {
    if (typeof args.values.kind !== "string")
      throw new UsageError("--kind is required: peer, github, ifttt or webhook");
    const body: Json = { name: nameOf(args), kind: args.values.kind, ...(await buildFields(args)) };
    const jwt = await readJwt(args);
    if (jwt) body.jwt = jwt;
    const result = await callAdmin(cli, "createCaller", {
      body: body as AdminRequestBody<"createCaller">,
      headers: await operatorHeaders(args, cli),
    });
    if (args.values.json) {
      cli.io.out(toTerminalJson(result));
      return exitCodes.ok;
    }
    cli.io.out(`created ${describeCaller(result.caller)}`);
    if (result.unknownAllowEntries.length) {
      cli.io.out(
        `note: allow entries that name no tool: ${result.unknownAllowEntries.map((e) => quoteUntrusted(e)).join(", ")}`,
      );
    }
    printCredential(cli, result.credential);
    return exitCodes.ok;
  },
};
