// `GET /admin/v1/doctor`: the doctor's checks as the running server sees them — its own
// environment (the model it was started with, its database, its policies, the sandbox it probed at
// start), not the environment of the shell `peergate doctor` runs in. A second terminal lacking
// PEERGATE_MODEL would otherwise report `FAIL model` for a server whose model works.
//
// Nothing here reveals a secret: checks name the model, files and counts, never a key or token.
import type { z } from "zod";
import type { Config } from "../config.ts";
import type { Database } from "../db/client.ts";
import type { LoadedPolicies } from "../load-policies.ts";
import type { SandboxStatus } from "../sandbox/prepare-sandbox.ts";
import { parseInput } from "./caller-input.ts";
import { type DoctorCheck, diagnose } from "./doctor.ts";
import { doctorQuerySchema, type serverDoctorSchema } from "./server-doctor-schemas.ts";

export type ServerDoctorInput = {
  readonly config: Config;
  readonly database: Database;
  readonly policies: LoadedPolicies;
  /** What the server found when it probed the sandbox at start. */
  readonly sandbox: SandboxStatus;
  readonly query: unknown;
};

export async function diagnoseServer(
  input: ServerDoctorInput,
): Promise<z.infer<typeof serverDoctorSchema>> {
  const query = parseInput(doctorQuerySchema, input.query ?? {});
  const checks = await diagnose({
    config: input.config,
    database: input.database,
    policies: input.policies,
    modelCall: query.modelCall !== "false",
    // The server probed it at start; probing again per request would start a process each time.
    sandbox: false,
  });
  const sandbox = sandboxCheck(input.config, input.sandbox);
  const at = checks.findIndex((c) => c.check === "public URL");
  checks.splice(at < 0 ? checks.length : at, 0, sandbox);
  return { ok: !checks.some((c) => c.status === "fail"), checks };
}

function sandboxCheck(config: Config, status: SandboxStatus): DoctorCheck {
  if (config.sandbox === "none") {
    return {
      check: "sandbox",
      status: "warn",
      detail: "PEERGATE_SANDBOX=none: processes started for runs are not confined",
      fix: "install bubblewrap and unset PEERGATE_SANDBOX",
    };
  }
  return status.ok
    ? { check: "sandbox", status: "ok", detail: `${config.sandbox}: ${status.detail}` }
    : {
        check: "sandbox",
        status: "fail",
        detail: status.detail,
        fix: "see docs/sandbox.md; process tools are refused until it works",
      };
}
