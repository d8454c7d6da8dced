#!/usr/bin/env node
// The `peergate` executable (package.json "bin" and `npm start`): src/main.ts with Node's compile
// cache switched on first (src/cli/compile-cache.mjs), so that main.ts itself is read from the
// cache too. Plain JavaScript: a TypeScript entry would be type-stripped on every run, before it
// could switch anything on.
import { useCompileCache } from "../src/cli/compile-cache.mjs";

useCompileCache(process.env);
await import("../src/main.ts");
