// What every resource of the admin API's contract shares: the RFC 9457 problem body and the error
// responses that carry it, the route parameters and operator-token headers, and the small
// builders of a JSON request body and a JSON answer.
import { z } from "zod";

export const iso = z.string().describe("an ISO 8601 time");

export const problemSchema = z
  .object({
    type: z.string().optional(),
    title: z.string().optional(),
    status: z.number().int().optional(),
    code: z.string().optional(),
    detail: z.string().optional(),
    problems: z
      .array(
        z.object({
          field: z.string(),
          message: z.string(),
          expected: z.string().optional(),
          value: z.unknown().optional(),
        }),
      )
      .optional(),
  })
  .describe("an RFC 9457 problem; `problems` names each bad field");

export const nameParams = z.object({
  name: z.string().describe("the caller's name"),
});
export const runParams = z.object({ id: z.string().describe("the run's id") });
export const operatorHeader = z.object({
  "x-peergate-operator-token": z
    .string()
    .optional()
    .describe("the operator token; needed when the change widens (docs/authority.md)"),
});
export const requiredOperatorHeader = z.object({
  "x-peergate-operator-token": z.string().describe("the operator token"),
});
export const revokeBodySchema = z.object({ reason: z.string().optional() });

export const json = <S extends z.ZodType>(schema: S, description: string) => ({
  content: { "application/json": { schema } },
  description,
});
export const body = <S extends z.ZodType>(schema: S, required = true) => ({
  content: { "application/json": { schema } },
  required,
});
export const problems = {
  400: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "invalid request",
  },
  401: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "no valid admin token",
  },
  403: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "refused (a browser Origin, or a widening without the operator token)",
  },
  404: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "no such caller or run",
  },
  409: {
    content: { "application/problem+json": { schema: problemSchema } },
    description: "conflict (a stale version, or a run no longer parked)",
  },
} as const;

export const admin = [{ adminToken: [] }];
