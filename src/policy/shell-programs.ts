// Moved to src/shell/programs.ts (the shell reader is a leaf module); this path re-exports it for existing importers.
export * from "../shell/programs.ts";
