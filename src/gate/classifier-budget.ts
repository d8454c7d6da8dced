// A classifier call is spent on the caller's behalf, so it is admitted against the caller's
// remaining budget before it is made (DESIGN §5, §10): with a budget used up no model is called
// and the command fails closed (`high-risk`, naming the budget), and what a call spends is charged
// to the run's meters and usage at once, so one step of many commands cannot outspend its budget.
import type { BudgetName } from "../domain/run.ts";
import type { Classification } from "./decide.ts";

type Classify = (command: string) => Promise<Classification>;

/** What the classifier's admission needs of a run's budget meters (runs/budgets.ts makes them). */
export type ClassifierMeters = {
  /** The first budget already used up, if any. */
  exhausted(): BudgetName | undefined;
  charge(delta: { steps: number; tokens: number; costUsd: number }): void;
};

/** `classify`, admitted against `meters` before each call and charged to them (and `used`) after. */
export function admitClassifier(
  meters: ClassifierMeters,
  used: { tokens: number; costUsd: number },
  classify: Classify,
): Classify {
  return async (command) => {
    const spent = meters.exhausted();
    if (spent !== undefined) {
      return {
        model: "",
        result: {
          verdict: "high-risk",
          failure: "budget",
          reason: `not classified: the caller's ${spent} budget is used up, so no classifier call was made and the command reads as high-risk`,
          usage: { inputTokens: undefined, outputTokens: undefined, latencyMs: 0 },
        },
      };
    }
    const classified = await classify(command);
    const tokens =
      (classified.result.usage.inputTokens ?? 0) + (classified.result.usage.outputTokens ?? 0);
    const costUsd = classified.costUsd ?? 0;
    meters.charge({ steps: 0, tokens, costUsd });
    used.tokens += tokens;
    used.costUsd += costUsd;
    return classified;
  };
}
