// Moved to src/shell/command-key.ts (the shell reader is a leaf module); this path re-exports it for existing importers.
export * from "../shell/command-key.ts";
