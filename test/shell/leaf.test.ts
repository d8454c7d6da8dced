// The shell reader is a leaf: policy, the gate, tools and the CLI import it, and it imports
// nothing of theirs, so reading shell text never drags in the engine, the database or HTTP.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";

const dir = path.resolve(import.meta.dirname, "../../src/shell");

describe("src/shell is a leaf module", () => {
  it("imports only node built-ins, the grammar's runtime and its own files", async () => {
    const outside: string[] = [];
    for (const file of await readdir(dir)) {
      if (!file.endsWith(".ts")) continue;
      const text = await readFile(path.join(dir, file), "utf8");
      for (const match of text.matchAll(/^\s*(?:import|export)[^"']*from\s+["']([^"']+)["']/gm)) {
        const from = match[1] as string;
        if (from.startsWith("node:") || from === "web-tree-sitter") continue;
        if (from.startsWith("./") && !from.slice(2).includes("/")) continue;
        outside.push(`${file}: ${from}`);
      }
    }
    expect(outside).toEqual([]);
  });
});
