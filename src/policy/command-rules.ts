// Moved to src/shell/deny-rules.ts (the shell reader is a leaf module); this path re-exports it for existing importers.
export * from "../shell/deny-rules.ts";
