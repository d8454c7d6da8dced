// Shared builders for the policy tests: small inventories, agents and callers, and fast-check
// arbitraries for random ones. No I/O.
import fc from "fast-check";
import type { AgentToolPolicy } from "../../src/policy/agent-tools.ts";
import type { CallerCeilingInput } from "../../src/policy/ceiling.ts";
import {
  createInventory,
  describeTool,
  disclosureLevels,
  type Inventory,
  riskLevels,
  type ToolDeclaration,
  toolCategories,
} from "../../src/policy/tools.ts";

let versions = 0;

/** An inventory from declarations; fails the test if the names are refused. */
export function makeInventory(declarations: readonly ToolDeclaration[]): Inventory {
  const built = createInventory(
    declarations.map((d) => describeTool(d)),
    `test-inventory-${++versions}`,
  );
  if (!built.ok) throw new Error(built.problems.map((p) => `${p.name}: ${p.message}`).join("; "));
  return built.inventory;
}

/** An agent offering every category and denying nothing, unless told otherwise. */
export function makeAgent(overrides: Partial<AgentToolPolicy> = {}): AgentToolPolicy {
  return {
    tools: [...toolCategories],
    deniedTools: [],
    version: `test-agent-${++versions}`,
    ...overrides,
  };
}

export function makeCaller(overrides: Partial<CallerCeilingInput> = {}): CallerCeilingInput {
  return { name: "peer-a", tier: "public", allow: [], version: 1, ...overrides };
}

/** Hostile spellings of `name` that must never match it. */
export function listHostileVariants(name: string): string[] {
  const upper = name.toUpperCase();
  const firstUpper = `${name.charAt(0).toUpperCase()}${name.slice(1)}`;
  return [
    upper,
    firstUpper,
    name.replace("a", "\u0430"), // Cyrillic а
    name.replace("e", "\u0435"), // Cyrillic е
    name.replace("o", "\u043e"), // Cyrillic о
    `${name}\u200b`, // zero-width space
    `\u200d${name}`, // zero-width joiner
    `\u202e${name}`, // right-to-left override
    `${name}\u200f`, // right-to-left mark
    `${name} `,
    ` ${name}`,
    `${name}\t`,
    `${name}\n`,
    name.normalize("NFD"),
    [...name].map((c) => String.fromCodePoint((c.codePointAt(0) ?? 0) + 0xfee0)).join(""), // fullwidth
  ].filter((variant) => variant !== name);
}

// --- fast-check arbitraries -------------------------------------------------------------------

const declarationShape = fc.record({
  category: fc.constantFrom(...toolCategories),
  risk: fc.option(fc.constantFrom(...riskLevels), { nil: undefined }),
  disclosure: fc.option(fc.constantFrom(...disclosureLevels), { nil: undefined }),
  egress: fc.option(fc.boolean(), { nil: undefined }),
  alias: fc.boolean(),
  twoPhase: fc.boolean(),
  needsPerson: fc.boolean(),
  persistsOperatorState: fc.boolean(),
});

/** Random inventories of up to 25 tools, some with aliases and hidden halves, some undeclared. */
export const arbitraryInventory: fc.Arbitrary<Inventory> = fc
  .array(declarationShape, { maxLength: 25 })
  .map((shapes) =>
    makeInventory(
      shapes.map((shape, i) => ({
        name: `tool_${i}`,
        category: shape.category,
        risk: shape.risk,
        disclosure: shape.disclosure,
        egress: shape.egress,
        aliases: shape.alias ? [`alias_${i}`] : [],
        twoPhase: shape.twoPhase,
        needsPerson: shape.needsPerson,
        persistsOperatorState: shape.persistsOperatorState,
      })),
    ),
  );

/** Every name the inventory answers to, plus categories. */
export function listInventoryWords(inventory: Inventory): string[] {
  return [...inventory.names.keys(), ...toolCategories];
}

/** Names an allow list or agent entry might hold: real ones, hostile variants, noise. */
export function arbitraryEntry(inventory: Inventory): fc.Arbitrary<string> {
  const words = listInventoryWords(inventory);
  const real = words.length > 0 ? fc.constantFrom(...words) : fc.constant("tool_0");
  return fc.oneof(
    { weight: 5, arbitrary: real },
    { weight: 2, arbitrary: real.chain((w) => fc.constantFrom(w, ...listHostileVariants(w))) },
    {
      weight: 1,
      arbitrary: fc.constantFrom("__proto__", "constructor", "toString", "hasOwnProperty", ""),
    },
    { weight: 1, arbitrary: fc.string() },
  );
}

export function arbitraryAgent(inventory: Inventory): fc.Arbitrary<AgentToolPolicy> {
  const entry = arbitraryEntry(inventory);
  return fc
    .record({
      tools: fc.array(entry, { maxLength: 12 }),
      deniedTools: fc.array(entry, { maxLength: 4 }),
    })
    .map((a) => makeAgent(a));
}

export const arbitraryTier = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("none", "public", "internal", "private") },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "Public",
      "PRIVATE",
      "private ",
      "",
      "__proto__",
      "admin",
      "\u0440ublic",
    ),
  },
  { weight: 1, arbitrary: fc.string() },
);

export function arbitraryCaller(inventory: Inventory): fc.Arbitrary<CallerCeilingInput> {
  return fc.record({
    name: fc.string({ minLength: 1 }),
    tier: arbitraryTier,
    allow: fc.array(arbitraryEntry(inventory), { maxLength: 15 }),
    version: fc.nat(),
  });
}

/** An inventory with an agent and a caller drawn for it. */
export const arbitraryScenario = arbitraryInventory.chain((inventory) =>
  fc.record({
    inventory: fc.constant(inventory),
    agent: arbitraryAgent(inventory),
    caller: arbitraryCaller(inventory),
  }),
);
