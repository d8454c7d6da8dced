// The admin API's route for the operator's own credentials: rotating the cluster's admin token
// (the only way it changes; docs/operating.md).
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { z } from "zod";
import { rotateAdminTokenSchema } from "../../services/rotate-admin-token.ts";
import { admin, body, iso, json, problems, requiredOperatorHeader } from "./admin-api-shared.ts";

export const operatorRoutes = {
  rotateAdminToken: createRoute({
    method: "post",
    path: "/admin-token/rotate",
    summary: "Issue a new admin token; the old one stops now or after graceSeconds",
    security: admin,
    request: { body: body(rotateAdminTokenSchema, false), headers: requiredOperatorHeader },
    responses: {
      200: json(
        z.object({
          token: z.string().describe("the new admin token, shown once"),
          prefix: z.string(),
          oldTokensExpireAt: iso,
        }),
        "the new admin token",
      ),
      ...problems,
    },
  }),
} as const satisfies Record<string, RouteConfig>;
