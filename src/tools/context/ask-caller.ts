// ask_caller: the model asks the caller who started the run a question and the run waits for the
// answer. It is not a person at this machine's keyboard (that is ask_user_question, withheld from
// every caller run): the question goes back over the protocol the caller already speaks, to the
// party the ceiling was computed for, so it reveals nothing the run's answer could not carry
// (`public`, read-only, no egress). It is an optional built-in: it enters the inventory only when
// agent.yaml names `ask_caller` in `tools` (src/tools/builtin-tools.ts), because it changes how
// a run can end. Once there, the ceiling admits it like any read-only, non-egress public tool,
// for every tier above `none`, and `deniedTools` or a caller's tier `none` takes it away.
//
// The run loop, not this implementation, handles a call the caller can answer: a step whose only
// call is ask_caller, in an A2A run, ends the segment `input-required` with the question
// (src/runs/run-loop.ts), and the caller's next message on the same task becomes the call's
// result. `execute` runs only where no answer can come: a call beside other calls in one step, or
// a run started by a webhook. It says so, so the model carries on without the answer.
import { z } from "zod";
import { defineBuiltin } from "../builtin.ts";
import { runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";

export const askCallerToolName = "ask_caller";
export const maxQuestionChars = 2_000;

export const askCallerTool = defineBuiltin(
  {
    name: askCallerToolName,
    category: "context",
    risk: "read-only",
    disclosure: "public",
    egress: false,
    description:
      "Ask the agent that sent you this task a question and wait for its answer. Call it alone " +
      "(no other tool in the same step), only when you cannot go on without the answer.",
  },
  () => createAskCallerTool(),
);

export const askCallerInput = z.strictObject({
  question: z.string().trim().min(1).max(maxQuestionChars),
});

/** The question of an ask_caller call, or undefined when its arguments are not one. */
export function readQuestion(args: unknown): string | undefined {
  const parsed = askCallerInput.safeParse(args);
  return parsed.success ? parsed.data.question : undefined;
}

export function createAskCallerTool(): ToolImplementation {
  return {
    name: askCallerToolName,
    description: askCallerTool.descriptor.description,
    inputSchema: askCallerInput,
    timeoutMs: 5_000,
    execute: (args, invocation) =>
      runGuarded(invocation, async () => {
        askCallerInput.parse(args);
        throw new ToolCallError(
          "refused",
          "No answer can come for this call: ask_caller must be the only tool call of its step, " +
            "and only a caller that speaks A2A can answer. Nothing was asked; go on without it.",
        );
      }),
  };
}
