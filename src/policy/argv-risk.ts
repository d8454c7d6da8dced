// Moved to src/shell/argv-floor.ts (the shell reader is a leaf module); this path re-exports it for existing importers.
export * from "../shell/argv-floor.ts";
