// What a model's tokens cost, from `policies/models.yaml`: per model id (`provider:model`, exactly
// as configured), US dollars per million input and per million output tokens, plus an optional
// `default` for models not listed.
//
// A model with no price has an unknown cost. A run is then refused at once (`cost-unknown`) when
// its caller has a cost budget (per run or daily), because a budget that cannot be measured would
// not hold; callers without a cost budget run and are charged $0. Cached-input discounts are not
// modelled: input tokens are charged at the input price, which errs on the side of stopping early.
import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import { z } from "zod";
import { ConfigError, type Problem } from "../errors.ts";
import { plainIssueWords } from "../plain-issue.ts";

export type ModelPrice = {
  readonly inputUsdPerMillionTokens: number;
  readonly outputUsdPerMillionTokens: number;
};

export type PriceTable = {
  readonly models: ReadonlyMap<string, ModelPrice>;
  readonly fallback: ModelPrice | undefined;
};

export const emptyPriceTable: PriceTable = { models: new Map(), fallback: undefined };

const usd = z
  .number({ error: "US dollars per million tokens, a number ≥ 0" })
  .finite({ error: "US dollars per million tokens, a number ≥ 0" })
  .min(0, { error: "US dollars per million tokens, a number ≥ 0" });

const priceSchema = z.strictObject(
  { inputUsdPerMillionTokens: usd, outputUsdPerMillionTokens: usd },
  { error: "a mapping with inputUsdPerMillionTokens and outputUsdPerMillionTokens" },
);

const fileSchema = z.strictObject(
  {
    models: z
      .preprocess((v) => (v === null ? undefined : v), z.record(z.string(), priceSchema))
      .default({}),
    default: z.preprocess((v) => (v === null ? undefined : v), priceSchema.optional()),
  },
  { error: "a mapping with `models` (and optionally `default`)" },
);

/** Parses models.yaml text. Throws ConfigError listing every problem. */
export function parsePriceTable(text: string, fileName: string): PriceTable {
  let raw: unknown;
  try {
    raw = parse(text) ?? {};
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(
      [{ field: fileName, message: `${fileName}: not valid YAML: ${reason}` }],
      `peergate cannot start: bad price file ${fileName}`,
    );
  }
  const parsed = fileSchema.safeParse(raw, { error: plainIssueWords });
  if (!parsed.success) {
    const problems: Problem[] = parsed.error.issues.map((issue) => {
      const at = issue.path.map(String).join(".") || "(top level)";
      const detail = issue.code === "unrecognized_keys" ? "a known field name" : issue.message;
      return {
        field: `${fileName}: ${at}`,
        expected: detail,
        message: `${fileName}: ${at}: expected ${detail}`,
      };
    });
    throw new ConfigError(problems, `peergate cannot start: bad price file ${fileName}`);
  }
  return {
    models: new Map(Object.entries(parsed.data.models)),
    fallback: parsed.data.default,
  };
}

/** Reads `file`; a missing file is an empty table (every cost unknown). */
export async function loadPriceTable(file: string): Promise<PriceTable> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return emptyPriceTable;
    throw error;
  }
  return parsePriceTable(text, file);
}

/** The price of `modelId`: its own entry, else the table's default, else undefined (unknown). */
export function findModelPrice(table: PriceTable, modelId: string): ModelPrice | undefined {
  return table.models.get(modelId) ?? table.fallback;
}

/** US dollars for a step's tokens. */
export function computeCostUsd(
  price: ModelPrice,
  tokens: { input: number; output: number },
): number {
  return (
    (tokens.input * price.inputUsdPerMillionTokens +
      tokens.output * price.outputUsdPerMillionTokens) /
    1_000_000
  );
}
