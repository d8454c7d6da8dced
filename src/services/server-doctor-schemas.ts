// What `GET /admin/v1/doctor` accepts and answers (src/services/server-doctor.ts). Apart from it
// so that the admin API's contract, loaded at every start, does not load the doctor's checks.
import { z } from "zod";

export const doctorQuerySchema = z.strictObject({
  modelCall: z
    .enum(["true", "false"], { error: "true or false" })
    .optional()
    .describe("make one tiny model call from the server (default true)"),
});

export const doctorCheckSchema = z.object({
  check: z.string(),
  status: z.enum(["ok", "warn", "fail", "skip"]),
  detail: z.string(),
  fix: z.string().optional(),
});

export const serverDoctorSchema = z.object({
  ok: z.boolean().describe("false when a check failed"),
  checks: z.array(doctorCheckSchema),
});
