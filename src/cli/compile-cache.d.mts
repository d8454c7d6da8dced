// The types of compile-cache.mjs (plain JavaScript, so that loading it costs no type stripping).
/** Switches Node's compile cache on for every module loaded from now on, when it is safe to. */
export function useCompileCache(env: Readonly<Record<string, string | undefined>>): boolean;
