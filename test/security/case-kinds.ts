// The attack-case categories, shared by the tests (./cases.ts) and the report (./report.ts), which
// must not import vitest's runtime.
export const caseCategories = ["auth", "bodies", "jwt", "webhooks", "ceilings", "secrets"] as const;
export type CaseCategory = (typeof caseCategories)[number];

export type SecurityCase = { category: CaseCategory; name: string; admitted: boolean };

/** The test-metadata key the cases are recorded under. */
export const casesMetaKey = "securityCases";
