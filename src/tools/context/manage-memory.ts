// manage_memory: a descriptor only. It writes the operator's own state, so it is withheld from
// caller runs and has no implementation here; the ceiling still reasons about it by name.
import { defineBuiltin } from "../builtin.ts";

export const manageMemoryTool = defineBuiltin({
  name: "manage_memory",
  category: "context",
  description: "Save or recall notes in the operator's memory.",
  risk: "low-risk",
  disclosure: "private",
  egress: false,
  persistsOperatorState: true,
});
