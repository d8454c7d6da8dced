// No built-in tool's name is written as a string literal in src/ outside src/tools/: what the gate
// and the rest need to know about a tool (its argv, its URL, its name for a message) comes from
// the tool's descriptor, declared in the tool's own file. Comments may name tools; code may not.
// The shell reader's program tables name programs (`find`, `mkdir`), not tools: those literals
// are allowed in the files that read shell text.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { builtinTools, optionalBuiltinTools } from "../../src/tools/builtin-tools.ts";

const src = path.join(import.meta.dirname, "../../src");

/** Files that read shell text: their literals are program names that happen to equal a tool's. */
const shellReader = /(^|\/)(shell[-/]|argv-risk|command-(key|rules|keys)|tools\/declared\/)/;

async function listSources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await listSources(full)));
    else if (entry.name.endsWith(".ts")) out.push(full);
  }
  return out;
}

/** The text of every string literal (and template literal chunk) in `source`, comments skipped. */
function readStringLiterals(source: string): string[] {
  const out: string[] = [];
  let i = 0;
  // Template nesting: each entry counts open braces inside one `${…}`.
  const templates: number[] = [];
  const readTemplateChunk = () => {
    let text = "";
    while (i < source.length) {
      const c = source[i] as string;
      if (c === "\\") {
        text += source.slice(i, i + 2);
        i += 2;
      } else if (c === "`") {
        i++;
        out.push(text);
        return;
      } else if (c === "$" && source[i + 1] === "{") {
        i += 2;
        out.push(text);
        templates.push(0);
        return;
      } else {
        text += c;
        i++;
      }
    }
  };
  while (i < source.length) {
    const c = source[i] as string;
    const next = source[i + 1];
    if (c === "/" && next === "/") {
      while (i < source.length && source[i] !== "\n") i++;
    } else if (c === "/" && next === "*") {
      const end = source.indexOf("*/", i + 2);
      i = end < 0 ? source.length : end + 2;
    } else if (c === '"' || c === "'") {
      let text = "";
      i++;
      while (i < source.length && source[i] !== c && source[i] !== "\n") {
        if (source[i] === "\\") {
          text += source.slice(i, i + 2);
          i += 2;
        } else text += source[i++];
      }
      i++;
      out.push(text);
    } else if (c === "`") {
      i++;
      readTemplateChunk();
    } else if (c === "{" && templates.length > 0) {
      templates[templates.length - 1] = (templates.at(-1) ?? 0) + 1;
      i++;
    } else if (c === "}" && templates.length > 0) {
      const depth = templates[templates.length - 1] as number;
      i++;
      if (depth === 0) {
        templates.pop();
        readTemplateChunk();
      } else templates[templates.length - 1] = depth - 1;
    } else i++;
  }
  return out;
}

describe("tool names live in src/tools/", () => {
  const names = new Set<string>();
  for (const tool of [...builtinTools, ...optionalBuiltinTools]) {
    names.add(tool.descriptor.name);
    if (tool.descriptor.executeHalf !== undefined) names.add(tool.descriptor.executeHalf);
  }

  it("reads literals and skips comments", () => {
    const text = [
      '// "web_fetch" in a comment',
      "/* 'execute_command' */",
      'const a = "write_file";',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: source text holding a template literal
      "const b = `x ${'ls'} y ${{ k: `read_file` }.k}`;",
    ].join("\n");
    expect(readStringLiterals(text).sort()).toEqual([
      "",
      " y ",
      "ls",
      "read_file",
      "write_file",
      "x ",
    ]);
  });

  it("finds no built-in tool's name as a string literal outside src/tools/", async () => {
    expect(names.has("execute_command")).toBe(true);
    expect(names.has("web_fetch")).toBe(true);
    const found: string[] = [];
    for (const file of await listSources(src)) {
      const relative = path.relative(src, file).split(path.sep).join("/");
      if (relative.startsWith("tools/")) continue;
      const literals = readStringLiterals(await readFile(file, "utf8"));
      for (const literal of literals) {
        if (!names.has(literal)) continue;
        if (shellReader.test(relative)) continue;
        found.push(`src/${relative}: "${literal}"`);
      }
    }
    expect(found).toEqual([]);
  });
});
