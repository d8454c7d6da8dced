// The admin API's callers: adding, listing, changing, revoking and restoring a caller, rotating
// its credential, its ceiling (current or previewed), its push hosts, and the tool inventory
// ceilings are computed from. Request schemas are the services' own.
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { approvalPolicies, callerKinds, tiers } from "../../domain/caller.ts";
import {
  ceilingReasons,
  disclosureLevels,
  nobodyThereModes,
  riskLevels,
  toolCategories,
} from "../../domain/tool-words.ts";
import { applyCallersSchema } from "../../services/apply-callers.ts";
import { createCallerSchema, updateCallerSchema } from "../../services/caller-input.ts";
import { previewCeilingSchema } from "../../services/preview-ceiling.ts";
import { restoreCallerSchema } from "../../services/restore-caller.ts";
import { rotateCredentialSchema } from "../../services/rotate-credential.ts";
import { pushHostsSchema } from "../../services/set-push-hosts.ts";
import {
  admin,
  body,
  iso,
  json,
  nameParams,
  operatorHeader,
  problems,
  requiredOperatorHeader,
  revokeBodySchema,
} from "./admin-api-shared.ts";

export const credentialViewSchema = z.object({
  id: z.string(),
  kind: z.string(),
  prefix: z.string(),
  createdAt: iso,
  expiresAt: iso.nullable(),
  revokedAt: iso.nullable(),
  active: z.boolean(),
});

export const callerViewSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    kind: z.enum(callerKinds),
    tier: z.enum(tiers),
    revoked: z.boolean(),
    allow: z.array(z.string()),
    approvalPolicy: z.enum(approvalPolicies),
    budgets: z.record(z.string(), z.unknown()),
    promptTemplate: z.string().nullable(),
    eventFilter: z.array(z.string()).nullable(),
    jwt: z.record(z.string(), z.unknown()).nullable(),
    commands: z.array(z.string()).describe("command allowlist entries (`git status`)"),
    toolOverrides: z.record(z.string(), z.string()).describe("tool name to allow, deny or prompt"),
    urlGrants: z
      .object({
        hosts: z.array(z.string()).optional(),
        suffixes: z.array(z.string()).optional(),
        prefixes: z.array(z.string()).optional(),
      })
      .nullable()
      .describe("web_fetch URL grants; null: web_fetch follows the approval policy"),
    whenNobody: z.enum(nobodyThereModes).describe("a call that needs a person: park or decline"),
    classifier: z
      .enum(["on", "off"])
      .describe("off: the command risk classifier never rates this caller's commands"),
    version: z.number().int(),
    createdAt: iso,
    updatedAt: iso,
    revokedAt: iso.nullable(),
    credentials: z.array(credentialViewSchema),
  })
  .describe("a caller, without secrets (fields added by later versions may appear)");

export const issuedCredentialSchema = z
  .object({
    id: z.string(),
    kind: z.string(),
    prefix: z.string(),
    secret: z.string().describe("shown once; peergate keeps only its hash"),
    usage: z.string().describe("how to use it, ready to paste"),
    url: z.string().optional().describe("IFTTT: the full URL to paste into the applet"),
  })
  .describe("a new credential");

const ceilingDecisionSchema = z.object({
  tool: z.string(),
  admitted: z.boolean(),
  reason: z.enum(ceilingReasons),
  sentence: z.string(),
});

export const ceilingReportSchema = z.object({
  caller: z.object({
    name: z.string().optional(),
    tier: z.string(),
    allow: z.array(z.string()).readonly(),
  }),
  inventoryVersion: z.string(),
  agentVersion: z.string(),
  admitted: z.array(z.string()),
  decisions: z.array(ceilingDecisionSchema).readonly(),
  unknownAllowEntries: z.array(z.object({ entry: z.string(), note: z.string() })),
  runNames: z.array(
    z.object({
      name: z.string(),
      tool: z.string(),
      kind: z.enum(["tool", "alias", "execute-half"]),
    }),
  ),
});

const toolViewSchema = z.object({
  name: z.string(),
  category: z.enum(toolCategories),
  risk: z.enum(riskLevels),
  disclosure: z.enum(disclosureLevels),
  egress: z.boolean(),
  aliases: z.array(z.string()).readonly(),
  executeHalf: z.string().nullable(),
  needsPerson: z.boolean(),
  persistsOperatorState: z.boolean(),
  description: z.string(),
});

export const callerRoutes = {
  createCaller: createRoute({
    method: "post",
    path: "/callers",
    summary: "Add a caller; its credential is in the answer, once",
    security: admin,
    request: { body: body(createCallerSchema), headers: operatorHeader },
    responses: {
      201: json(
        z.object({
          caller: callerViewSchema,
          credential: issuedCredentialSchema
            .nullable()
            .describe("null for a JWT peer: it authenticates only with JWTs signed by its key"),
          unknownAllowEntries: z.array(z.string()),
        }),
        "the caller and its credential",
      ),
      ...problems,
    },
  }),
  listCallers: createRoute({
    method: "get",
    path: "/callers",
    summary: "Every caller",
    security: admin,
    responses: {
      200: json(z.object({ callers: z.array(callerViewSchema) }), "the callers"),
      ...problems,
    },
  }),
  getCaller: createRoute({
    method: "get",
    path: "/callers/{name}",
    summary: "One caller",
    security: admin,
    request: { params: nameParams },
    responses: { 200: json(z.object({ caller: callerViewSchema }), "the caller"), ...problems },
  }),
  updateCaller: createRoute({
    method: "patch",
    path: "/callers/{name}",
    summary: "Change a caller (widening needs the operator token)",
    security: admin,
    request: { params: nameParams, body: body(updateCallerSchema), headers: operatorHeader },
    responses: {
      200: json(
        z.object({
          caller: callerViewSchema,
          changed: z.array(z.string()),
          unknownAllowEntries: z.array(z.string()),
        }),
        "the changed caller",
      ),
      ...problems,
    },
  }),
  revokeCaller: createRoute({
    method: "post",
    path: "/callers/{name}/revoke",
    summary: "Revoke a caller: its credentials stop working and every run of it ends revoked",
    security: admin,
    request: { params: nameParams, body: body(revokeBodySchema, false) },
    responses: {
      200: json(
        z.object({
          caller: callerViewSchema,
          credentialsRevoked: z.number().int(),
          waitingRunsRevoked: z.number().int(),
          workingRunsStopped: z.number().int(),
          parkedRunsRejected: z.number().int().describe("deprecated: waitingRunsRevoked"),
        }),
        "the revoked caller",
      ),
      ...problems,
    },
  }),
  restoreCaller: createRoute({
    method: "post",
    path: "/callers/{name}/restore",
    summary: "Restore a revoked caller at a tier, with a new credential (needs the operator token)",
    security: admin,
    request: {
      params: nameParams,
      body: body(restoreCallerSchema),
      headers: requiredOperatorHeader,
    },
    responses: {
      200: json(
        z.object({
          caller: callerViewSchema,
          credential: issuedCredentialSchema.nullable().describe("null for a JWT peer"),
        }),
        "the restored caller and its new credential",
      ),
      ...problems,
    },
  }),
  rotateCredential: createRoute({
    method: "post",
    path: "/callers/{name}/rotate",
    summary: "Issue a new credential; the old ones expire after graceSeconds",
    security: admin,
    request: {
      params: nameParams,
      body: body(rotateCredentialSchema, false),
      headers: operatorHeader,
    },
    responses: {
      200: json(
        z.object({
          caller: callerViewSchema,
          credential: issuedCredentialSchema,
          oldCredentialsExpireAt: iso,
        }),
        "the new credential",
      ),
      ...problems,
    },
  }),
  getCeiling: createRoute({
    method: "get",
    path: "/callers/{name}/ceiling",
    summary: "A caller's ceiling, tool by tool, with the reason for each",
    security: admin,
    request: { params: nameParams },
    responses: {
      200: json(
        ceilingReportSchema.extend({ revoked: z.boolean(), version: z.number().int() }),
        "the ceiling",
      ),
      ...problems,
    },
  }),
  previewCeiling: createRoute({
    method: "post",
    path: "/ceiling/preview",
    summary: "What-if: the ceiling a caller with this tier and allow list would have",
    security: admin,
    request: { body: body(previewCeilingSchema) },
    responses: { 200: json(ceilingReportSchema, "the hypothetical ceiling"), ...problems },
  }),
  getPushHosts: createRoute({
    method: "get",
    path: "/callers/{name}/push-hosts",
    summary: "Where a caller may have A2A push notifications sent",
    security: admin,
    request: { params: nameParams },
    responses: {
      200: json(z.object({ hosts: z.array(z.string()) }), "the push grants"),
      ...problems,
    },
  }),
  setPushHosts: createRoute({
    method: "put",
    path: "/callers/{name}/push-hosts",
    summary: "Replace a caller's push grants (adding one widens: the operator token too)",
    security: admin,
    request: { params: nameParams, body: body(pushHostsSchema) },
    responses: {
      200: json(z.object({ hosts: z.array(z.string()) }), "the push grants now"),
      ...problems,
    },
  }),
  applyCallers: createRoute({
    method: "post",
    path: "/callers/apply",
    summary:
      "Make a callers file true in one transaction (creates, changes, push grants, --prune); dryRun rolls it back",
    security: admin,
    request: { body: body(applyCallersSchema), headers: operatorHeader },
    responses: {
      200: json(
        z.object({
          dryRun: z.boolean(),
          actions: z.array(
            z
              .object({
                name: z.string(),
                action: z.enum(["create", "update", "unchanged", "revoke", "delete", "drift"]),
                fields: z.record(z.string(), z.unknown()).optional(),
                changes: z
                  .record(z.string(), z.object({ from: z.unknown(), to: z.unknown() }))
                  .optional()
                  .describe("field → {from, to}, stored value and the file's"),
                needsOperator: z
                  .array(z.string())
                  .optional()
                  .describe("fields that widen the caller: the operator token is needed"),
                note: z.string().optional(),
              })
              .describe("what apply did (or would do) to one caller"),
          ),
          credentials: z.array(issuedCredentialSchema.extend({ name: z.string() })),
        }),
        "what was applied (or, on a dry run, would be)",
      ),
      ...problems,
    },
  }),
  listTools: createRoute({
    method: "get",
    path: "/tools",
    summary: "The tool inventory ceilings are computed from",
    security: admin,
    responses: {
      200: json(
        z.object({ inventoryVersion: z.string(), tools: z.array(toolViewSchema) }),
        "the inventory",
      ),
      ...problems,
    },
  }),
} as const satisfies Record<string, RouteConfig>;
