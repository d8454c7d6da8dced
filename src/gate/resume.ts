// A parked batch answered, one approval at a time (DESIGN §11: a batch parks whole). While any
// call of the batch still waits for a person, nothing of it runs: an approved call joins the held
// ones, a rejected one gets its refusal at once, and so do the calls only the policy let run (a
// rejected batch is not half applied). When the last answer is in, every held call runs; a chain
// stage met on the way parks the run again.
import type { ToolResultPart } from "ai";
import type { HeldCall, PendingBatch } from "../domain/run.ts";
import { answerApproval } from "./ask.ts";
import { closeWith } from "./close.ts";
import { batchRejectedText, interruptedText } from "./results.ts";
import type { ApprovalDecision, BatchDeps, IndexedApproval, IndexedResult } from "./types.ts";

export type AnsweredBatch =
  | {
      readonly kind: "park";
      readonly results: IndexedResult[];
      readonly approvals: IndexedApproval[];
      readonly held: HeldCall[];
    }
  | { readonly kind: "done"; readonly results: IndexedResult[]; readonly stopped: boolean };

/** Applies the answer to the call the run waited on, and runs the batch once nothing waits. */
export async function answerParkedBatch(
  deps: BatchDeps,
  batch: PendingBatch,
  decision: ApprovalDecision,
  inputOf: (toolCallId: string) => unknown,
): Promise<AnsweredBatch> {
  const results: IndexedResult[] = batch.results.map((r) => ({
    index: r.index,
    part: r.part as unknown as ToolResultPart,
  }));
  let held: HeldCall[] = [...(batch.held ?? [])];
  const [head, ...rest] = batch.approvals;
  if (head !== undefined) {
    if (decision.approved) {
      held.push({ ...head, heldBy: "operator" });
    } else {
      const answered = await answerApproval(deps, head, decision, inputOf);
      if ("approval" in answered) {
        return {
          kind: "park",
          results,
          approvals: [{ ...answered.approval, index: head.index }, ...rest],
          held,
        };
      }
      results.push({ index: head.index, part: answered.part });
      // A rejection turns the batch down: what only the policy let run does not run after it
      // (what an operator approved still does; they answered knowing the rest).
      for (const call of held.filter((h) => h.heldBy === "policy")) {
        const closing = { recordId: call.callId, shown: call.calledTool ?? call.tool, ref: call };
        const part = await closeWith(deps, closing, { status: "not-started" }, batchRejectedText, {
          quiet: true,
        });
        results.push({ index: call.index, part });
      }
      held = held.filter((h) => h.heldBy !== "policy");
    }
  }
  if (rest.length > 0 && !deps.signal.aborted) {
    return { kind: "park", results, approvals: rest, held };
  }
  return runHeld(deps, results, [...rest, ...held], inputOf);
}

/** Every held call, now that nothing of the batch waits (or each "not started" if stopped). */
async function runHeld(
  deps: BatchDeps,
  results: IndexedResult[],
  waiting: ReadonlyArray<
    IndexedApproval & Partial<Pick<HeldCall, "heldBy" | "checkRedirects" | "stages">>
  >,
  inputOf: (toolCallId: string) => unknown,
): Promise<AnsweredBatch> {
  const again: IndexedApproval[] = [];
  let stopped = false;
  const queue = [...waiting].sort((a, b) => a.index - b.index);
  let next = 0;
  const lanes = Array.from(
    { length: Math.max(1, Math.min(deps.maxConcurrency, queue.length)) },
    async () => {
      while (next < queue.length) {
        const call = queue[next++] as (typeof queue)[number];
        const answered = await answerApproval(deps, call, { approved: true }, inputOf, call);
        if ("approval" in answered) again.push({ ...answered.approval, index: call.index });
        else {
          results.push({ index: call.index, part: answered.part });
          if (answered.stopped) stopped = true;
        }
      }
    },
  );
  await Promise.all(lanes);
  const halted = stopped || deps.signal.aborted;
  if (halted) {
    // A chain that met another stage as the run stopped: its earlier stages ran.
    for (const approval of again) {
      const call = { recordId: approval.callId, shown: approval.tool, ref: approval };
      const part = await closeWith(deps, call, { status: "interrupted" }, interruptedText, {
        quiet: true,
      });
      results.push({ index: approval.index, part });
    }
  }
  results.sort((a, b) => a.index - b.index);
  if (again.length > 0 && !halted) {
    return {
      kind: "park",
      results,
      approvals: again.sort((a, b) => a.index - b.index),
      held: [],
    };
  }
  return { kind: "done", results, stopped: halted };
}
