// Moved to src/shell/syntax.ts (the shell reader is a leaf module); this path re-exports it for existing importers.
export * from "../shell/syntax.ts";
