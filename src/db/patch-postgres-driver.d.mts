// Types for patch-postgres-driver.mjs (plain JavaScript, so npm can run it on any Node).
export type Hunk = { file: string; label: string; before: string; after: string };
export type HunkState = "mended" | "unmended" | "not recognised";
export type HunkResult = {
  file: string;
  flavour: string;
  hunk: string;
  index: number;
  state: HunkState;
};

export const pinnedVersion: string;
export const patchFile: string;
export const flavours: string[];
export function readPatch(text?: string): Hunk[];
export function inspectDriver(
  dir: string,
  hunks?: Hunk[],
): { version: string | null; results: HunkResult[] };
export function describeUnmended(dir: string, hunks?: Hunk[]): string[];
export class DriverNotRecognisedError extends Error {
  problems: string[];
  constructor(problems: string[]);
}
export function patchDriver(dir: string, expectedVersion?: string): HunkResult[];
export function readPinnedVersion(manifest?: string): string | undefined;
