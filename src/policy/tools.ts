// Tool descriptors and the inventory they live in. Each tool answers three separate questions
// (DESIGN §2): can it change something (`risk`), what class of information can its answer carry
// (`disclosure`), does calling it send data off this machine (`egress`). Anything undeclared or
// unrecognised reads as the most restricted value, so a gap in metadata never widens a ceiling.
//
// Names are exact and case-sensitive everywhere a decision is made, but registration refuses two
// names that fold to the same string (case, or Unicode NFKC), across canonical names, aliases and
// hidden execute halves alike: an operator reading `Write_File` in a table must never be looking
// at a different tool from `write_file`.

// Risk, disclosure and category are domain words (src/domain/tool-words.ts), named here too.
import {
  type Disclosure,
  disclosureLevels,
  type Risk,
  riskLevels,
  type ToolCategory,
  toolCategories,
} from "../domain/tool-words.ts";

export {
  type Disclosure,
  disclosureLevels,
  type Risk,
  riskLevels,
  type ToolCategory,
  toolCategories,
};

/** Caller tiers in order; `none` is what revocation sets. */
export const tiers = ["none", "public", "internal", "private"] as const;
export type Tier = (typeof tiers)[number];

export const toolNamePattern = /^[A-Za-z0-9_.-]{1,128}$/;

export type ToolDescriptor = {
  readonly name: string;
  readonly description: string;
  readonly category: ToolCategory;
  readonly risk: Risk;
  readonly disclosure: Disclosure;
  readonly egress: boolean;
  /** Other names the tool answers to (e.g. `glob` for `find`). Never advertised separately. */
  readonly aliases: readonly string[];
  /** The hidden second half of a two-phase tool; only the approval path may run it. */
  readonly executeHalf: string | undefined;
  /** Needs a person to answer (ask_user_question): withheld from caller runs. */
  readonly needsPerson: boolean;
  /** Writes the operator's own state (manage_memory): withheld from caller runs. */
  readonly persistsOperatorState: boolean;
  /** What the gate reads from a call's arguments (src/gate/decide.ts); absent: nothing. */
  readonly reads?: ArgumentReaders;
};

/**
 * What the gate needs to read from a call's arguments, declared by the tool in its own file so
 * the gate never names a tool: the argv a call would run (the risk floor, the command allowlist
 * and the classifier read it) and the URL it connects to (the caller's URL grants bind it).
 */
export type ArgumentReaders = {
  readonly argv?: (args: unknown) => readonly string[] | undefined;
  readonly url?: (args: unknown) => string | undefined;
};

/** What a source declares; every missing or unrecognised property reads as the strictest value. */
export type ToolDeclaration = {
  readonly name: string;
  readonly category: ToolCategory;
  readonly description?: string | undefined;
  readonly risk?: Risk | undefined;
  readonly disclosure?: Disclosure | undefined;
  readonly egress?: boolean | undefined;
  readonly aliases?: readonly string[] | undefined;
  readonly twoPhase?: boolean | undefined;
  readonly needsPerson?: boolean | undefined;
  readonly persistsOperatorState?: boolean | undefined;
  readonly reads?: ArgumentReaders | undefined;
};

/** How a name in the inventory relates to its tool. */
export type ToolNameKind = "tool" | "alias" | "execute-half";

export type ToolNameEntry = {
  readonly tool: ToolDescriptor;
  readonly kind: ToolNameKind;
  /** The tool's position in `Inventory.tools`. */
  readonly index: number;
};

export type Inventory = {
  /** Content hash of the inventory, computed by the loader; part of every ceiling cache key. */
  readonly version: string;
  readonly tools: readonly ToolDescriptor[];
  /** Every name any tool answers to, exactly as spelled: canonical names, aliases, hidden halves. */
  readonly names: ReadonlyMap<string, ToolNameEntry>;
};

export type InventoryResult =
  | { readonly ok: true; readonly inventory: Inventory }
  | { readonly ok: false; readonly problems: readonly NameProblem[] };

/** A name that cannot be registered; `where` says which declaration holds it. */
export type NameProblem = {
  readonly where: string;
  readonly name: string;
  readonly message: string;
};

const riskSet: ReadonlySet<string> = new Set(riskLevels);
const disclosureSet: ReadonlySet<string> = new Set(disclosureLevels);
const categorySet: ReadonlySet<string> = new Set(toolCategories);

/** Disclosure and tier share one scale: a tool is visible to a tier iff rank(disclosure) ≤ rank(tier). */
const rankByLevel: ReadonlyMap<string, number> = new Map([
  ["none", 0],
  ["public", 1],
  ["internal", 2],
  ["private", 3],
]);

/** The tier's rank, or undefined for anything that is not exactly one of `tiers`. */
export function rankTier(tier: string): number | undefined {
  return rankByLevel.get(tier);
}

/** A risk level's place in `riskLevels`; anything unrecognised ranks as `unknown`. */
export function rankRisk(risk: Risk): number {
  const rank = riskLevels.indexOf(risk);
  return rank < 0 ? riskLevels.length - 1 : rank;
}

/** The higher of two risk levels. */
export function raiseRisk(a: Risk, b: Risk): Risk {
  return rankRisk(a) >= rankRisk(b) ? a : b;
}

export function rankDisclosure(disclosure: Disclosure): number {
  return rankByLevel.get(disclosure) ?? 3;
}

export function isToolCategory(value: string): value is ToolCategory {
  return categorySet.has(value);
}

export function isValidToolName(name: string): boolean {
  return toolNamePattern.test(name);
}

/**
 * The form two names are compared in for collisions: NFKC, then a full case fold (upper then
 * lower, so `ß`/`ss` and `K`/`K` meet), then NFKC again because case mapping can denormalise.
 */
export function foldToolName(name: string): string {
  return name.normalize("NFKC").toUpperCase().toLowerCase().normalize("NFKC");
}

export function nameExecuteHalf(toolName: string): string {
  return `execute_${toolName}`;
}

/** Fills in a descriptor, reading anything missing or unrecognised as the most restricted value. */
export function describeTool(declaration: ToolDeclaration): ToolDescriptor {
  const risk = declaration.risk;
  const disclosure = declaration.disclosure;
  return {
    name: declaration.name,
    description: declaration.description ?? "",
    category: declaration.category,
    risk: risk !== undefined && riskSet.has(risk) ? risk : "unknown",
    disclosure: disclosure !== undefined && disclosureSet.has(disclosure) ? disclosure : "private",
    // Only an explicit `false` means the tool keeps data on this machine.
    egress: declaration.egress !== false,
    aliases: [...(declaration.aliases ?? [])],
    executeHalf: declaration.twoPhase === true ? nameExecuteHalf(declaration.name) : undefined,
    needsPerson: declaration.needsPerson === true,
    persistsOperatorState: declaration.persistsOperatorState === true,
    ...(declaration.reads === undefined ? {} : { reads: Object.freeze({ ...declaration.reads }) }),
  };
}

/** Every name the tool answers to, canonical first. */
export function listToolNames(tool: ToolDescriptor): string[] {
  const names = [tool.name, ...tool.aliases];
  if (tool.executeHalf !== undefined) names.push(tool.executeHalf);
  return names;
}

/**
 * Checks a list of names about to share one namespace: each must match the name pattern, must not
 * be a category word (agent.yaml mixes names and categories), and no two may fold to the same
 * string. Every problem is returned, in input order.
 */
export function checkToolNames(
  entries: readonly { readonly name: string; readonly where: string }[],
): NameProblem[] {
  const problems: NameProblem[] = [];
  const seen = new Map<string, { name: string; where: string }>();
  for (const { name, where } of entries) {
    if (!isValidToolName(name)) {
      problems.push({
        where,
        name,
        message: "a tool name of 1 to 128 characters from A-Z a-z 0-9 _ . -",
      });
    }
    const folded = foldToolName(name);
    if (isToolCategory(folded)) {
      problems.push({
        where,
        name,
        message: `a name that is not a category word (${toolCategories.join(", ")})`,
      });
    }
    const earlier = seen.get(folded);
    if (earlier === undefined) {
      seen.set(folded, { name, where });
    } else {
      problems.push({
        where,
        name,
        message:
          earlier.name === name
            ? `a name not already used by ${earlier.where}`
            : `a name that does not collide with ${JSON.stringify(earlier.name)} (${earlier.where}): names may not differ only by case or Unicode form`,
      });
    }
  }
  return problems;
}

/** Builds an inventory, refusing invalid or colliding names (never throws). */
export function createInventory(
  tools: readonly ToolDescriptor[],
  version: string,
): InventoryResult {
  const entries: { name: string; where: string }[] = [];
  for (const tool of tools) {
    entries.push({ name: tool.name, where: `tool ${JSON.stringify(tool.name)}` });
    for (const alias of tool.aliases) {
      entries.push({ name: alias, where: `an alias of ${JSON.stringify(tool.name)}` });
    }
    if (tool.executeHalf !== undefined) {
      entries.push({
        name: tool.executeHalf,
        where: `the execute half of ${JSON.stringify(tool.name)}`,
      });
    }
  }
  const problems = checkToolNames(entries);
  if (problems.length > 0) return { ok: false, problems };

  const names = new Map<string, ToolNameEntry>();
  const frozen: ToolDescriptor[] = [];
  for (const [index, tool] of tools.entries()) {
    const copy = Object.freeze({ ...tool, aliases: Object.freeze([...tool.aliases]) });
    frozen.push(copy);
    names.set(copy.name, Object.freeze({ tool: copy, kind: "tool", index }));
    for (const alias of copy.aliases) {
      names.set(alias, Object.freeze({ tool: copy, kind: "alias", index }));
    }
    if (copy.executeHalf !== undefined) {
      names.set(copy.executeHalf, Object.freeze({ tool: copy, kind: "execute-half", index }));
    }
  }
  return {
    ok: true,
    inventory: Object.freeze({ version, tools: Object.freeze(frozen), names }),
  };
}
