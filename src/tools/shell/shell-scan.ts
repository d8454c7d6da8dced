// Moved to src/shell/scan.ts (the shell reader is a leaf module); this path re-exports it for existing importers.
export * from "../../shell/scan.ts";
