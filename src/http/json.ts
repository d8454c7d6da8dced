// Reading a JSON request body. The media type must be application/json (415 otherwise); the text
// must parse (400 naming the position), must not repeat a key, since JSON.parse silently keeps
// the last and two readers of the same body could then disagree about what it means, and must not
// nest deeper than anything we read recursively survives (src/json-text.ts).
import type { Context } from "hono";
import { UnsupportedMediaTypeError, ValidationError } from "../errors.ts";
import { findDuplicateKey, maxJsonDepth, nestsDeeperThan } from "../json-text.ts";

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
  if (nestsDeeperThan(value)) {
    throw new ValidationError([
      {
        field: "(body)",
        message: `body nests objects or arrays more than ${maxJsonDepth} levels deep`,
      },
    ]);
  }
  return value;
}
