// Counting attack cases. Every attack a security test makes is recorded on the running test's
// metadata (`task.meta.securityCases`), which vitest's JSON reporter writes out with the results;
// `npm run security:report` (test/security/report.ts) adds them up by category. Nothing is written
// to disk by the tests themselves.
//
//   const admitted = response.status < 300;
//   expectRefused("auth", `${route} missing Authorization`, admitted);
import { expect, TestRunner } from "vitest";
import { type CaseCategory, casesMetaKey, type SecurityCase } from "./case-kinds.ts";

export type { CaseCategory, SecurityCase } from "./case-kinds.ts";

/** Records one attack case on the current test; returns `admitted` for chaining. */
export function recordCase(category: CaseCategory, name: string, admitted: boolean): boolean {
  const test = TestRunner.getCurrentTest();
  if (!test) throw new Error(`recordCase(${name}) called outside a test`);
  const meta = test.meta as Record<string, unknown>;
  const cases = (meta[casesMetaKey] as SecurityCase[] | undefined) ?? [];
  cases.push({ category, name, admitted });
  meta[casesMetaKey] = cases;
  return admitted;
}

/** Records the case and fails the test if the attack was admitted. */
export function expectRefused(category: CaseCategory, name: string, admitted: boolean): void {
  recordCase(category, name, admitted);
  expect(admitted, `attack admitted: ${name}`).toBe(false);
}
