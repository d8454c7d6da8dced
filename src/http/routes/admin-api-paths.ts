// Each admin API operation's method and path, as plain data: what the CLI needs to call one
// without loading the contract's schemas (zod-openapi, hono and the services' schemas) at run
// time — `peergate callers list` would otherwise load most of the server to send one GET. The
// contract (admin-api.ts) declares the same routes with their schemas; the CLI takes its types
// from there (`import type`, erased at run time), and test/cli/admin-api-paths.test.ts keeps this
// table equal to the contract's.
import type { AdminOperation } from "./admin-api.ts";

export type AdminPath = {
  readonly method: "get" | "post" | "put" | "patch" | "delete";
  readonly path: string;
};

export const adminPaths = {
  createCaller: { method: "post", path: "/callers" },
  listCallers: { method: "get", path: "/callers" },
  getCaller: { method: "get", path: "/callers/{name}" },
  updateCaller: { method: "patch", path: "/callers/{name}" },
  revokeCaller: { method: "post", path: "/callers/{name}/revoke" },
  restoreCaller: { method: "post", path: "/callers/{name}/restore" },
  rotateCredential: { method: "post", path: "/callers/{name}/rotate" },
  getCeiling: { method: "get", path: "/callers/{name}/ceiling" },
  previewCeiling: { method: "post", path: "/ceiling/preview" },
  getPushHosts: { method: "get", path: "/callers/{name}/push-hosts" },
  setPushHosts: { method: "put", path: "/callers/{name}/push-hosts" },
  applyCallers: { method: "post", path: "/callers/apply" },
  listTools: { method: "get", path: "/tools" },
  listAudit: { method: "get", path: "/audit" },
  verifyAudit: { method: "get", path: "/audit/verify" },
  listAuditCheckpoints: { method: "get", path: "/audit/checkpoints" },
  prune: { method: "post", path: "/prune" },
  listRuns: { method: "get", path: "/runs" },
  getRun: { method: "get", path: "/runs/{id}" },
  approveRun: { method: "post", path: "/runs/{id}/approve" },
  rejectRun: { method: "post", path: "/runs/{id}/reject" },
  cancelRun: { method: "post", path: "/runs/{id}/cancel" },
  retryRun: { method: "post", path: "/runs/{id}/retry" },
  rotateAdminToken: { method: "post", path: "/admin-token/rotate" },
  getDoctor: { method: "get", path: "/doctor" },
  getOverview: { method: "get", path: "/overview" },
} as const satisfies Record<AdminOperation, AdminPath>;
