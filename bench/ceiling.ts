// Ceiling benchmark: `npm exec -- node bench/ceiling.ts`. Prints a markdown table.
//
// "cold" is computeCeiling with no ceiling-cache hit: every call gets a different caller (tier and
// allow list vary). What an inventory or an (inventory, agent) pair determines on its own is built
// on the first call and shared after that, so that first call is reported on its own row, and a
// row with a new agent object per call shows the cost when the (inventory, agent) view is rebuilt.
// "memoised" is CeilingCache.get for callers already in the cache: the per-request hot path.
// Targets (issue 3): cold 10 000-tool ceiling under 1 ms median; memoised over 5 million/s.
import type { AgentToolPolicy } from "../src/policy/agent-tools.ts";
import { type CallerCeilingInput, computeCeiling } from "../src/policy/ceiling.ts";
import { createCeilingCache } from "../src/policy/ceiling-cache.ts";
import {
  createInventory,
  describeTool,
  disclosureLevels,
  type Inventory,
  riskLevels,
  type ToolCategory,
  type ToolDescriptor,
  toolCategories,
} from "../src/policy/tools.ts";
import {
  type CommandKeyResult,
  explainCoverage,
  parseAllowEntry,
} from "../src/shell/command-key.ts";
import { commandKey, commandKeyUncached } from "../src/shell/keys.ts";
import { scanShell } from "../src/shell/scan.ts";

/** A small deterministic PRNG (mulberry32) so every run measures the same inputs. */
function createRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

function buildInventory(size: number, random: () => number): Inventory {
  const tools: ToolDescriptor[] = [];
  for (let i = 0; i < size; i++) {
    tools.push(
      describeTool({
        name: `tool_${i}`,
        category: pick(random, toolCategories) as ToolCategory,
        risk: pick(random, riskLevels),
        disclosure: pick(random, disclosureLevels),
        egress: random() < 0.3,
        aliases: random() < 0.05 ? [`alias_${i}`] : [],
        twoPhase: random() < 0.1,
        needsPerson: random() < 0.01,
        persistsOperatorState: random() < 0.01,
      }),
    );
  }
  const built = createInventory(tools, `bench-${size}`);
  if (!built.ok) throw new Error(built.problems.map((p) => p.message).join("; "));
  return built.inventory;
}

function buildCallers(count: number, size: number, random: () => number): CallerCeilingInput[] {
  const tiers = ["public", "internal", "private", "none", "bogus"];
  return Array.from({ length: count }, (_, i) => ({
    name: `caller-${i}`,
    tier: i % 10 === 9 ? pick(random, tiers) : pick(random, tiers.slice(0, 3)),
    allow: Array.from({ length: 8 }, () =>
      random() < 0.9
        ? `tool_${Math.floor(random() * size)}`
        : `Tool_${Math.floor(random() * size)}`,
    ),
    version: 1,
  }));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Median time per call in ms: calls run in batches long enough for the clock to resolve them. */
function measure(run: (i: number) => void, samples: number): number {
  let batch = 1;
  for (;;) {
    const start = performance.now();
    for (let i = 0; i < batch; i++) run(i);
    if (performance.now() - start >= 0.5 || batch >= 1 << 20) break;
    batch *= 2;
  }
  const times: number[] = [];
  let call = 0;
  for (let s = 0; s < samples; s++) {
    const start = performance.now();
    for (let i = 0; i < batch; i++) run(call++);
    times.push((performance.now() - start) / batch);
  }
  return median(times);
}

function formatMs(ms: number): string {
  return ms >= 0.1 ? `${ms.toFixed(3)} ms` : `${(ms * 1000).toFixed(2)} µs`;
}

function formatRate(perSecond: number): string {
  return Math.round(perSecond).toLocaleString("en-US");
}

const agent: AgentToolPolicy = {
  tools: ["files", "shell", "web", "context", "custom", "mcp"],
  deniedTools: ["tool_3", "alias_20", "tool_7"],
  version: "bench-agent",
};

const rows: string[] = ["| case | tools | median per call | ops/s |", "|---|---:|---:|---:|"];
let sink = 0;
for (const size of [50, 1_000, 10_000]) {
  const random = createRandom(size);
  const inventory = buildInventory(size, random);
  const callers = buildCallers(1_000, size, random);

  const firstStart = performance.now();
  sink += computeCeiling(inventory, agent, callers[0] as CallerCeilingInput).admitted.size;
  const first = performance.now() - firstStart;
  rows.push(`| first computeCeiling on a fresh inventory | ${size} | ${formatMs(first)} | — |`);

  // Warm up so every decision object and the agent view exist, and the JIT has settled.
  for (let i = 0; i < 200; i++) {
    sink += computeCeiling(inventory, agent, callers[i % callers.length] as CallerCeilingInput)
      .admitted.size;
  }
  const cold = measure((i) => {
    const caller = callers[i % callers.length] as CallerCeilingInput;
    sink += computeCeiling(inventory, agent, caller).admitted.size;
  }, 201);
  rows.push(`| cold computeCeiling | ${size} | ${formatMs(cold)} | ${formatRate(1000 / cold)} |`);

  // The same, but with a new agent object every call, so the (inventory, agent) view is rebuilt.
  const fresh = measure((i) => {
    const caller = callers[i % callers.length] as CallerCeilingInput;
    sink += computeCeiling(inventory, { ...agent }, caller).admitted.size;
  }, 101);
  rows.push(
    `| cold computeCeiling, agent view rebuilt each call | ${size} | ${formatMs(fresh)} | ${formatRate(1000 / fresh)} |`,
  );

  const cache = createCeilingCache({ maxEntries: 10_000 });
  for (const caller of callers) cache.get(inventory, agent, caller);
  const memo = measure((i) => {
    sink += cache.get(inventory, agent, callers[i % 1_000] as CallerCeilingInput).decisions.length;
  }, 201);
  rows.push(
    `| memoised CeilingCache.get | ${size} | ${formatMs(memo)} | ${formatRate(1000 / memo)} |`,
  );
}

// Command allowlists (issue 12): key extraction by the bash reader, then coverage against a
// caller's entries, per command, uncached (every call parses). Target > 200 000 commands/s; one
// parse by tree-sitter alone is ~10-20 µs here, so the uncached row cannot reach it (DESIGN §10:
// one reader even where a hand lexer would be faster).
const commands = [
  "git status --short",
  "git log --oneline -n 20",
  "ls -la src",
  "npm test -- --reporter=dot",
  "git status && rm -rf x",
  "grep -rn TODO src | head",
  "PAGER=x git log",
  "sudo apt install curl",
  "npx jest --ci",
  'echo "$(id)"',
];
const allowEntries = ["git status", "git log", "ls", "npm test", "npx jest"].map((text) => {
  const parsed = parseAllowEntry(text);
  if ("problem" in parsed) throw new Error(parsed.problem);
  return parsed.entry;
});
const keyRows: string[] = ["| case | median per command | commands/s |", "|---|---:|---:|"];
for (let i = 0; i < 2_000; i++)
  sink += commandKey(commands[i % commands.length] as string).key ? 1 : 0;
const parseOnly = measure((i) => {
  sink += scanShell(commands[i % commands.length] as string).commands.length;
}, 101);
keyRows.push(
  `| parse only (tree-sitter bash) | ${formatMs(parseOnly)} | ${formatRate(1000 / parseOnly)} |`,
);
const keyed = measure((i) => {
  const result = commandKeyUncached(commands[i % commands.length] as string);
  sink += explainCoverage(result, allowEntries).covered ? 1 : 0;
}, 101);
keyRows.push(`| key + coverage, uncached | ${formatMs(keyed)} | ${formatRate(1000 / keyed)} |`);
// The approval path's commandKey keeps keys of short scripts it has seen (bounded map): a model
// repeating a command pays the parse once. Reported apart, never instead of the row above.
const cached = measure((i) => {
  sink += explainCoverage(commandKey(commands[i % commands.length] as string), allowEntries).covered
    ? 1
    : 0;
}, 201);
keyRows.push(
  `| key + coverage, repeated commands (cache hits) | ${formatMs(cached)} | ${formatRate(1000 / cached)} |`,
);
const keys = commands.map((c) => commandKeyUncached(c));
const coverOnly = measure((i) => {
  sink += explainCoverage(keys[i % keys.length] as CommandKeyResult, allowEntries).covered ? 1 : 0;
}, 201);
keyRows.push(
  `| coverage of an extracted key | ${formatMs(coverOnly)} | ${formatRate(1000 / coverOnly)} |`,
);

console.log(
  `Ceiling benchmark (Node ${process.version}, ${new Date().toISOString().slice(0, 10)})\n`,
);
console.log(rows.join("\n"));
console.log(`\nCommand keys (${commands.length} commands in turn, a third of them with hazards)\n`);
console.log(keyRows.join("\n"));
if (sink === -1) console.log("");
