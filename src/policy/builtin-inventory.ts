// The built-in tools as descriptors. Their implementations live in src/tools/ (a later issue);
// what is fixed here is what each one may do, which is what the ceiling reasons about.
import { describeTool, type ToolDeclaration, type ToolDescriptor } from "./tools.ts";

const declarations: readonly ToolDeclaration[] = [
  {
    name: "read_file",
    category: "files",
    description: "Read a text file.",
    risk: "read-only",
    disclosure: "private",
    egress: false,
  },
  {
    name: "ls",
    category: "files",
    description: "List the entries of a directory.",
    risk: "read-only",
    disclosure: "internal",
    egress: false,
  },
  {
    name: "find",
    category: "files",
    description: "Find files by name or glob pattern.",
    risk: "read-only",
    disclosure: "internal",
    egress: false,
    aliases: ["glob"],
  },
  {
    name: "grep",
    category: "files",
    description: "Search file contents for a pattern.",
    risk: "read-only",
    disclosure: "private",
    egress: false,
  },
  {
    name: "stat",
    category: "files",
    description: "Show a file's size, type and modification time.",
    risk: "read-only",
    disclosure: "internal",
    egress: false,
  },
  {
    name: "get_time",
    category: "context",
    description: "Tell the current date and time.",
    risk: "read-only",
    disclosure: "public",
    egress: false,
  },
  {
    name: "web_fetch",
    category: "web",
    description: "Fetch a web page or URL.",
    risk: "read-only",
    disclosure: "public",
    egress: true,
  },
  {
    name: "write_file",
    category: "files",
    description: "Create or overwrite a file (shows a diff, then writes).",
    risk: "high-risk",
    disclosure: "public",
    egress: false,
    twoPhase: true,
  },
  {
    name: "edit_file",
    category: "files",
    description: "Replace text in a file (shows a diff, then writes).",
    risk: "high-risk",
    disclosure: "private",
    egress: false,
    twoPhase: true,
  },
  {
    name: "mkdir",
    category: "files",
    description: "Create a directory.",
    risk: "high-risk",
    disclosure: "public",
    egress: false,
  },
  {
    name: "execute_command",
    category: "shell",
    description: "Run a shell command.",
    risk: "unknown",
    disclosure: "private",
    // A shell can reach the network (curl, git push): the honest answer is yes.
    egress: true,
    twoPhase: true,
  },
  {
    name: "ask_user_question",
    category: "context",
    description: "Ask the person at the keyboard a question.",
    risk: "read-only",
    disclosure: "private",
    egress: false,
    needsPerson: true,
  },
  {
    name: "manage_memory",
    category: "context",
    description: "Save or recall notes in the operator's memory.",
    risk: "low-risk",
    disclosure: "private",
    egress: false,
    persistsOperatorState: true,
  },
];

/** The 13 built-in tools, in the order tables list them. */
export const builtinTools: readonly ToolDescriptor[] = Object.freeze(
  declarations.map((declaration) => Object.freeze(describeTool(declaration))),
);
