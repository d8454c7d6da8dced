// The contract's response types are checked against what the services really return, by the type
// checker (`npm run check`): a service that starts returning something the document does not say
// fails to compile here. The `it` makes the file a test so it is not mistaken for dead code.
import { expect, it } from "vitest";
import type { AdminResponse } from "../../src/cli/admin-client.ts";
import { adminPath } from "../../src/cli/admin-client.ts";
import type { AuditChainVerification } from "../../src/db/audit.ts";
import type { CeilingReport } from "../../src/policy/explain.ts";
import type { addCaller } from "../../src/services/add-caller.ts";
import type { CallerView } from "../../src/services/describe-caller.ts";
import type { explainCallerCeiling, listTools } from "../../src/services/explain-caller.ts";
import type { AuditEventView } from "../../src/services/read-audit.ts";
import type { restoreCaller } from "../../src/services/restore-caller.ts";
import type { revokeCaller } from "../../src/services/revoke-caller.ts";
import type { rotateCredential } from "../../src/services/rotate-credential.ts";
import type { RunDetail } from "../../src/services/runs/get-run.ts";
import type { RunSummary } from "../../src/services/runs/list-runs.ts";
import type { updateCaller } from "../../src/services/update-caller.ts";

type Returns<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;
/** Compiles only when `Served` is assignable to `Documented`. */
function fits<Documented>() {
  return function served<Served extends Documented>(_?: Served): true {
    return true;
  };
}

it("documents response types the services' results fit (checked by tsc)", () => {
  const checks = [
    fits<AdminResponse<"createCaller">>()<Returns<typeof addCaller>>(),
    fits<AdminResponse<"listCallers">>()<{ callers: CallerView[] }>(),
    fits<AdminResponse<"getCaller">>()<{ caller: CallerView }>(),
    fits<AdminResponse<"updateCaller">>()<Returns<typeof updateCaller>>(),
    fits<AdminResponse<"revokeCaller">>()<Returns<typeof revokeCaller>>(),
    fits<AdminResponse<"restoreCaller">>()<Returns<typeof restoreCaller>>(),
    fits<AdminResponse<"rotateCredential">>()<Returns<typeof rotateCredential>>(),
    fits<AdminResponse<"getCeiling">>()<Returns<typeof explainCallerCeiling>>(),
    fits<AdminResponse<"previewCeiling">>()<CeilingReport>(),
    fits<AdminResponse<"listTools">>()<ReturnType<typeof listTools>>(),
    fits<AdminResponse<"listAudit">>()<{ events: AuditEventView[]; next: number | null }>(),
    fits<AdminResponse<"verifyAudit">>()<AuditChainVerification>(),
    fits<AdminResponse<"listRuns">>()<{ runs: RunSummary[] }>(),
    fits<AdminResponse<"getRun">>()<{ run: RunDetail }>(),
  ];
  expect(checks.every(Boolean)).toBe(true);
  expect(adminPath("getCeiling", { params: { name: "a b" } })).toBe("/callers/a%20b/ceiling");
  expect(adminPath("listRuns", { query: { status: "parked", limit: 5, caller: undefined } })).toBe(
    "/runs?status=parked&limit=5",
  );
});
