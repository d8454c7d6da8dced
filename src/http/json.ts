// Reading a JSON request body. The media type must be application/json (415 otherwise); the text
// must parse (400 naming the position) and must not repeat a key, since JSON.parse silently keeps
// the last and two readers of the same body could then disagree about what it means.
import type { Context } from "hono";
import { UnsupportedMediaTypeError, ValidationError } from "../errors.ts";

export async function readJsonBody(
  c: Context,
  options: { optional?: boolean } = {},
): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "" && options.optional) return {};
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new UnsupportedMediaTypeError(
      `send the body as application/json (got ${type ? JSON.stringify(type.slice(0, 60)) : "no Content-Type"})`,
    );
  }
  return parseJsonText(text);
}

export function parseJsonText(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ValidationError([
      { field: "(body)", message: `body is not valid JSON: ${(error as Error).message}` },
    ]);
  }
  const duplicate = findDuplicateKey(text);
  if (duplicate !== undefined) {
    throw new ValidationError([
      {
        field: duplicate,
        message: `body repeats the key ${JSON.stringify(duplicate)}; each key may appear once`,
      },
    ]);
  }
  return value;
}

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
