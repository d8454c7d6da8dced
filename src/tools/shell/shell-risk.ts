// Moved to src/shell/risk.ts (the shell reader is a leaf module); this path re-exports it for existing importers.
export * from "../../shell/risk.ts";
