// The admin API's route for `peergate doctor`: the running server's own checks, so a doctor run
// in another shell reports the server's model, database, policies and sandbox, not its own.
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { doctorQuerySchema, serverDoctorSchema } from "../../services/server-doctor-schemas.ts";
import { admin, json, problems } from "./admin-api-shared.ts";

export const doctorRoutes = {
  getDoctor: createRoute({
    method: "get",
    path: "/doctor",
    summary: "The doctor's checks as this server sees them (its configuration; never a key)",
    security: admin,
    request: { query: doctorQuerySchema },
    responses: {
      200: json(serverDoctorSchema, "the server's checks; ok is false when one failed"),
      ...problems,
    },
  }),
} as const satisfies Record<string, RouteConfig>;
