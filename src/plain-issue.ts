// zod's own words for a bad value ("Invalid input: expected number, received string") are a
// programmer's. Passed to `safeParse` as the per-parse error map, this says what was expected in
// an operator's words wherever a schema gave no message of its own (a schema's own message wins:
// zod ranks it above the per-parse map).
import type { z } from "zod";

const typeWords: Record<string, string> = {
  number: "a number",
  int: "a whole number",
  string: "text",
  boolean: "true or false",
  array: "a list",
  object: "an object (key: value)",
  bigint: "a whole number",
  date: "a date",
  null: "null",
};

function sizeWords(origin: string, bound: number | bigint): string {
  if (origin === "string") return `${bound} characters`;
  if (origin === "array" || origin === "set") return `${bound} entries`;
  return String(bound);
}

/** What was expected, in plain words; undefined leaves zod's default. */
export function plainIssueWords(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      return typeWords[issue.expected] ?? `a value of type ${issue.expected}`;
    case "too_small":
      return `${issue.inclusive === false ? "more than" : "at least"} ${sizeWords(issue.origin, issue.minimum)}`;
    case "too_big":
      return `${issue.inclusive === false ? "less than" : "at most"} ${sizeWords(issue.origin, issue.maximum)}`;
    case "invalid_value":
      return `one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "invalid_format":
      return `a valid ${issue.format}`;
    case "not_multiple_of":
      return `a multiple of ${issue.divisor}`;
    case "invalid_union":
      return "one of the accepted forms";
    case "unrecognized_keys":
      return `no field named ${issue.keys.join(", ")}`;
    default:
      return undefined;
  }
}
