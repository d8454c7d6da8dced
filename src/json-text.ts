// Reading JSON request bodies the same way on every surface (the admin API and /a2a).
//
// - A repeated key is refused: JSON.parse keeps the last of two equal keys, so two readers of one
//   body (a proxy or log pipeline that keeps the first, and us) could disagree about what it asks,
//   e.g. `{"method": "GetTask", "method": "SendMessage"}`.
// - Nesting deeper than `maxJsonDepth` is refused before anything walks the value recursively:
//   JSON.stringify, zod and the A2A SDK's converters overflow the stack at a few thousand levels,
//   which answered 500 (admin API) or a JSON-RPC internal error (/a2a). No request we serve needs
//   more than a handful of levels.
// And writing JSON one way: `canonicalJson`, whose text the audit chain hashes and argument
// digests compare, so equal values always give equal text.

/** Objects and arrays nested deeper than this are refused. */
export const maxJsonDepth = 64;

/**
 * The first key that appears twice in one object of `text`, which is known to be valid JSON.
 * A small scanner rather than a second parser: it tracks strings, and one key set per open object.
 */
export function findDuplicateKey(text: string): string | undefined {
  const stack: (Set<string> | null)[] = [];
  let i = 0;
  let expectKey = false;
  while (i < text.length) {
    const ch = text[i];
    if (ch === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const raw = text.slice(i, j + 1);
      i = j + 1;
      const top = stack.at(-1);
      if (expectKey && top) {
        const key = JSON.parse(raw) as string;
        if (top.has(key)) return key;
        top.add(key);
        expectKey = false;
      }
      continue;
    }
    if (ch === "{") {
      stack.push(new Set());
      expectKey = true;
    } else if (ch === "[") {
      stack.push(null);
    } else if (ch === "}" || ch === "]") {
      stack.pop();
    } else if (ch === ",") {
      expectKey = stack.at(-1) instanceof Set;
    }
    i += 1;
  }
  return undefined;
}

/** Whether `value` (parsed JSON) nests objects or arrays deeper than `limit`. Iterative. */
export function nestsDeeperThan(value: unknown, limit: number = maxJsonDepth): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [v, depth] = item;
    if (v === null || typeof v !== "object") continue;
    if (depth > limit) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

/** JSON with object keys sorted at every depth, so equal values always give equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`cannot encode ${typeof value} as JSON`);
    return text;
  }
  if (Array.isArray(value)) {
    let text = "[";
    for (let i = 0; i < value.length; i++) {
      if (i > 0) text += ",";
      text += canonicalJson(value[i] ?? null);
    }
    return `${text}]`;
  }
  // sort() without a comparator orders by UTF-16 code units, as `<` on strings does.
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object).sort();
  let text = "{";
  for (const key of keys) {
    const v = object[key];
    if (v === undefined) continue;
    if (text.length > 1) text += ",";
    text += `${JSON.stringify(key)}:${canonicalJson(v)}`;
  }
  return `${text}}`;
}
