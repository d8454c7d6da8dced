// Every place in a bash syntax tree where bash evaluates text the script does not show as such
// (syntax.ts's EvaluatedText): arithmetic contexts, array subscripts, prompt and indirect
// expansion. The floor (floor.ts) judges each. Read from the tree's node types, apart from the
// flat scan (scan.ts), because these sit inside words, tests and compound statements alike.
import type { Node } from "web-tree-sitter";
import type { EvaluatedText } from "./syntax.ts";

const arithmeticTests = new Set(["-eq", "-ne", "-lt", "-le", "-gt", "-ge"]);
const offsetExpansion = /^\$\{#?[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?:(?![-=?+])/;

/** Every place bash evaluates text (syntax.ts's EvaluatedText), anywhere in the tree. */
export function collectEvaluated(root: Node): EvaluatedText[] {
  const out: EvaluatedText[] = [];
  const cursor = root.walk();
  try {
    for (;;) {
      const node = cursor.currentNode;
      switch (node.type) {
        case "arithmetic_expansion":
        case "c_style_for_statement":
          out.push({ kind: "arithmetic", text: node.text });
          break;
        case "compound_statement":
          if (node.text.startsWith("((")) out.push({ kind: "arithmetic", text: node.text });
          break;
        case "subscript": {
          const index = node.childForFieldName("index");
          out.push({ kind: "subscript", text: index?.text ?? node.text });
          break;
        }
        case "binary_expression":
        case "unary_expression": {
          const op = node.childForFieldName("operator");
          if (op !== null && op.type === "test_operator") {
            if (arithmeticTests.has(op.text)) out.push({ kind: "arithmetic", text: node.text });
            if (op.text === "-v" && node.text.includes("[")) {
              out.push({ kind: "subscript", text: node.text });
            }
          }
          break;
        }
        case "expansion": {
          const text = node.text;
          if (/@P\}$/.test(text)) out.push({ kind: "prompt", text });
          if (
            text.startsWith("${!") &&
            !/^\$\{![A-Za-z_][A-Za-z0-9_]*(\[[@*]\]|[@*])\}$/.test(text)
          ) {
            out.push({ kind: "indirect", text });
          }
          if (offsetExpansion.test(text)) out.push({ kind: "arithmetic", text });
          break;
        }
      }
      if (cursor.gotoFirstChild()) continue;
      while (!cursor.gotoNextSibling()) {
        if (!cursor.gotoParent()) return out;
      }
    }
  } finally {
    cursor.delete();
  }
}
