// One segment of a run, from its first (or resumed) step to its end, and the record of how it
// ended: finished (completed, failed, stopped), parked for an operator, waiting for its caller's
// answer (`input-required`), or taken over by another
// instance that thought this one dead. The run is already registered as active and owned by this
// instance in the database when a segment starts.
//
// What the segment hands the gate (its controls, the declared command tools' shapes, the
// classifier call) is built in segment-gate.ts.
import type { ModelMessage } from "ai";
import type { Caller, PendingApproval, Run, RunBudgetUsed } from "../db/schema.ts";
import { storableText } from "../db/storable.ts";
import { isWaitingStatus, type PendingInput } from "../domain/run.ts";
import type { ApprovalDecision, BatchDeps, ToolCallRecorder } from "../gate/batch.ts";
import { admitClassifier } from "../gate/classifier-budget.ts";
import { type RunControlsHolder, snapshotControls } from "../gate/controls.ts";
import { policiesNow } from "../load-policies.ts";
import { isCallerRevoked } from "../policy/caller-revoked.ts";
import type { EffectiveToolSet } from "../policy/effective-set.ts";
import { type Attributes, failSpan, inSpan, startSpan } from "../trace.ts";
import type { ActiveRun, StopReason } from "./active-runs.ts";
import { createBudgetMeters, describeBudgetExceeded, formatUtcDay, zeroUsage } from "./budgets.ts";
import { buildModelTools } from "./model-tools.ts";
import { mapSegmentEnd, outcomeOf } from "./outcome.ts";
import type { RunCore } from "./run-core.ts";
import { runSegment, type SegmentEnd } from "./run-loop.ts";
import { listCallIds, lockRun, readDailyTotals, readRun } from "./run-queries.ts";
import {
  awaitCallerInput,
  chargeStep,
  closeParkedRuns,
  createToolCallRecorder,
  finishRun,
  parkRun,
  type RecordedStop,
  readStopRequest,
  revokedStopReason,
  saveMessages,
  saveRunControls,
} from "./run-state.ts";
import { classifyWith, commandToolShapes, runControlsFor } from "./segment-gate.ts";
import type { RunEnd, RunEvent, RunMeter, RunOutcome, StartRunRequest } from "./types.ts";

export type SegmentInput = {
  readonly run: Run;
  readonly caller: Caller;
  readonly set: EffectiveToolSet;
  readonly resume?:
    | { readonly decision: ApprovalDecision }
    /** The caller's answer to the question the run waited on. */
    | { readonly answer: { readonly pending: PendingInput; readonly text: string } };
  /** False: the model is called without streaming (see StartRunRequest.stream). */
  readonly stream?: boolean;
  readonly onEvent: (event: RunEvent) => void;
  /** The request's writes for the run's end, committed with it (StartRunRequest.atEnd). */
  readonly atEnd?: StartRunRequest["atEnd"];
};

export type SegmentResult = {
  readonly outcome: RunOutcome;
  /** A parked run: the tool it waits on. An input-required run's outcome text is its question. */
  readonly pendingTool?: string;
  /** Another instance recorded the run's end; it tells the surfaces, not this one. */
  readonly takenOver?: true;
};

/** Runs a segment and records how it ended. Never rejects; unregisters the run at the end. */
export async function executeSegment(
  core: RunCore,
  entry: ActiveRun,
  input: SegmentInput,
): Promise<SegmentResult> {
  const startedMs = performance.now();
  const resumed = input.resume !== undefined;
  const tally: SegmentTally = { used: undefined };
  core.logger.info(resumed ? "run resumed" : "run started", {
    runId: entry.runId,
    callerId: input.caller.id,
    caller: input.caller.name,
    origin: input.run.origin,
  });
  let result: SegmentResult | undefined;
  try {
    result = await inSpan("peergate.run", runSpanAttributes(input, resumed), async (span) => {
      const done = await runAndRecord(core, entry, input, tally);
      span.setAttribute("peergate.run.outcome", done.outcome.status);
      if (done.outcome.error) failSpan(span, undefined, done.outcome.error.code);
      return done;
    });
    return result;
  } catch (error) {
    // The database went away or a bug: the run is left for recovery to mark interrupted.
    core.logger.error("a run segment could not be recorded", { runId: entry.runId, error });
    return {
      outcome: {
        runId: entry.runId,
        status: "interrupted",
        error: { code: "internal", message: "the run stopped inside peergate; see the server log" },
        messages: input.run.messages as ModelMessage[],
      },
    };
  } finally {
    if (result) noteSegmentEnd(core, input, result, tally, performance.now() - startedMs);
    core.active.remove(entry.runId);
    // A server declared `scope: run` lives for one segment: a resumed run starts a fresh one.
    core.tools.releaseRun?.(entry.runId).catch((error: unknown) => {
      core.logger.warn("could not close a run's MCP servers", { runId: entry.runId, error });
    });
  }
}

/** What the run's span says of it: ids, origin, caller; never its messages. */
function runSpanAttributes(input: SegmentInput, resumed: boolean): Attributes {
  return {
    "peergate.run.id": input.run.id,
    "peergate.run.origin": input.run.origin,
    "peergate.run.resumed": resumed,
    "peergate.caller.id": input.caller.id,
    "peergate.caller.name": input.caller.name,
  };
}

/** The run's usage as the segment counts it, for its end's log line and meter. */
type SegmentTally = { used: RunBudgetUsed | undefined };

/** The segment's end: one info line (the run, its caller, how it ended, its spend) and the meter. */
function noteSegmentEnd(
  core: RunCore,
  input: SegmentInput,
  result: SegmentResult,
  tally: SegmentTally,
  durationMs: number,
): void {
  const before = { ...zeroUsage, ...input.run.budgetUsed };
  const tokens = Math.max(0, (tally.used?.tokens ?? before.tokens) - before.tokens);
  const costUsd = Math.max(0, (tally.used?.costUsd ?? before.costUsd) - before.costUsd);
  const model = core.model.ok ? core.model.id : undefined;
  core.logger.info("run finished", {
    runId: input.run.id,
    callerId: input.caller.id,
    caller: input.caller.name,
    origin: input.run.origin,
    outcome: result.outcome.status,
    ...(result.outcome.error ? { code: result.outcome.error.code } : {}),
    tokens,
    costUsd,
    durationMs: Math.round(durationMs),
  });
  try {
    core.meter.segmentEnded({
      runId: input.run.id,
      callerId: input.caller.id,
      origin: input.run.origin,
      status: result.outcome.status,
      resumed: input.resume !== undefined,
      model,
      tokens,
      costUsd,
      durationMs,
    });
  } catch (error) {
    core.logger.error("a run meter failed", { error });
  }
}

async function runAndRecord(
  core: RunCore,
  entry: ActiveRun,
  input: SegmentInput,
  tally: SegmentTally,
): Promise<SegmentResult> {
  const { db, instanceId, now } = core;
  const { run, caller } = input;
  const startedMs = performance.now();
  const used: RunBudgetUsed = { ...zeroUsage, ...run.budgetUsed };
  tally.used = used;
  const messages = [...(run.messages as ModelMessage[])];
  // Usage of steps not yet written: flushed before tools run, else with the run's end.
  const unflushed = { tokens: 0, costUsd: 0 };
  // The classifier's spend: charged to the caller's day, never to the run's own usage.
  const classifierSpend = { tokens: 0, costUsd: 0 };
  let callsRecorded = false;
  const end = await runSteps(
    core,
    entry,
    input,
    { used, messages, unflushed, classifierSpend },
    () => {
      callsRecorded = true;
    },
  );
  used.durationMs += Math.round(performance.now() - startedMs);
  const at = now();
  const daily = {
    callerId: caller.id,
    day: formatUtcDay(at),
    delta: {
      tokens: unflushed.tokens + classifierSpend.tokens,
      costUsd: unflushed.costUsd + classifierSpend.costUsd,
    },
  };

  if (end.kind === "input-required") {
    const pending: PendingInput = { ...end.pending, askedAt: at.toISOString() };
    const waiting = await awaitCallerInput(db, {
      runId: run.id,
      instanceId,
      pending,
      messages,
      used,
      waitUntil: new Date(at.getTime() + core.parkTtlMs),
      at,
      daily,
    });
    if (!waiting) return settleTakenOver(core, run, input);
    const stopped = await closeIfStoppedMeanwhile(core, entry, input, waiting.stop);
    if (stopped) return stopped;
    core.emit(input.onEvent, {
      type: "status",
      status: "input-required",
      message: pending.question,
    });
    return {
      outcome: { runId: run.id, status: "input-required", text: pending.question, messages },
    };
  }

  if (end.kind === "parked") {
    const pending: PendingApproval = {
      callId: end.pending.callId,
      tool: end.pending.tool,
      argsDigest: end.pending.argsDigest,
      args: end.pending.args,
      requestedAt: end.pending.requestedAt,
      ...(end.pending.calledTool ? { calledTool: end.pending.calledTool } : {}),
      ...(end.pending.risk ? { risk: end.pending.risk } : {}),
      ...(end.pending.summary ? { summary: end.pending.summary } : {}),
      ...(end.pending.previewDiff ? { previewDiff: end.pending.previewDiff } : {}),
      ...(end.pending.reason ? { reason: end.pending.reason } : {}),
      ...(end.pending.stage ? { stage: end.pending.stage } : {}),
    };
    const parked = await parkRun(db, {
      runId: run.id,
      instanceId,
      pending,
      batch: end.batch,
      messages,
      used,
      parkedUntil: new Date(at.getTime() + core.parkTtlMs),
      at,
      daily,
    });
    if (!parked) return settleTakenOver(core, run, input);
    const stopped = await closeIfStoppedMeanwhile(core, entry, input, parked.stop);
    if (stopped) return stopped;
    const pendingTool = pending.calledTool ?? pending.tool;
    core.emit(input.onEvent, {
      type: "status",
      status: "parked",
      message: `waiting for an operator to approve ${pendingTool}`,
    });
    return { outcome: { runId: run.id, status: "parked", messages }, pendingTool };
  }

  const { status, error, text } = mapSegmentEnd(end, entry.reason, {
    limits: run.budgetLimits,
    daily: caller.budgets.daily,
  });
  const ended: RunEnd = {
    runId: run.id,
    status,
    ...(text !== undefined && text !== "" ? { text } : {}),
    ...(error ? { error } : {}),
    endedAt: at,
  };
  const finishing = startSpan("peergate.run.finish", { "peergate.run.outcome": status });
  const finished = await finishRun(db, {
    runId: run.id,
    instanceId,
    status,
    text,
    error,
    messages,
    used,
    at,
    daily,
    toolCallsOpen: input.resume !== undefined || callsRecorded,
    ...(input.atEnd ? { alongside: input.atEnd(ended) } : {}),
  }).finally(() => finishing.end());
  if (!finished) return settleTakenOver(core, run, input);
  core.emit(input.onEvent, {
    type: "status",
    status,
    ...(error ? { message: error.message } : {}),
  });
  return { outcome: { ...ended, messages, ...(input.atEnd ? { endWritten: true } : {}) } };
}

/** The AI SDK loop with this run's tools, budgets, recorder and between-steps check. */
async function runSteps(
  core: RunCore,
  entry: ActiveRun,
  input: SegmentInput,
  state: {
    used: RunBudgetUsed;
    messages: ModelMessage[];
    unflushed: { tokens: number; costUsd: number };
    classifierSpend: { tokens: number; costUsd: number };
  },
  onCallsRecorded: () => void,
): Promise<SegmentEnd> {
  const { db, instanceId, now, model } = core;
  const { run, caller, set } = input;
  const { used, messages, unflushed } = state;
  // Read once: a policy reload while the segment runs reaches the runs that start after it.
  const policies = policiesNow(core.policies);
  const tools = core.tools.tools;
  const startable = core.checkStartable(caller);
  if ("error" in startable || !model.ok) {
    return {
      kind: "failed",
      error: "error" in startable ? startable.error : { code: "no-model", message: "no model" },
    };
  }
  const meters = createBudgetMeters({
    limits: run.budgetLimits,
    used,
    daily: caller.budgets.daily,
    // Today's totals matter only to a daily token or cost budget, and not once admission
    // reserved the run's share of the day (its meter grants no more than that share).
    dailyUsed:
      !run.budgetLimits.dailyReserve &&
      (caller.budgets.daily?.tokens !== undefined || caller.budgets.daily?.costUsd !== undefined)
        ? await readDailyTotals(db, caller.id, formatUtcDay(now()))
        : { tokens: 0, costUsd: 0, runs: 0 },
  });
  let cancelDeadline = () => {};
  if (meters.remainingMs !== undefined) {
    const deadline: StopReason = {
      kind: "deadline",
      message: describeBudgetExceeded("durationMs", run.budgetLimits, caller.budgets.daily),
    };
    if (meters.remainingMs <= 0) core.active.stop(entry, deadline);
    else {
      cancelDeadline = core.scheduleDeadline(meters.remainingMs, () =>
        core.active.stop(entry, deadline),
      );
    }
  }
  // The caller's controls when the run first stepped: widening later never reaches it.
  const started = run.controls ?? snapshotControls(caller);
  if (run.controls === null) await saveRunControls(db, run.id, started);
  const controls: RunControlsHolder = {
    current: runControlsFor(policies, run, started, caller, set),
  };
  const narrow = (current: Caller) => {
    controls.current = runControlsFor(
      policies,
      run,
      started,
      current,
      core.toolSetFor(current, [...run.toolSet], policies),
    );
  };
  // A resumed run runs the answered call first: a cancel recorded while it was being claimed is
  // read before that call, as before any step's tools.
  if (input.resume) await checkBetweenSteps(core, entry, narrow);
  // A first segment has no calls yet; a resumed one keeps its rows' ids unique.
  const recordIds = new Set(input.resume ? await listCallIds(db, run.id) : []);
  // Every name the inventory knows (the Map itself: one object per generation, so the model's
  // tools are built once per effective set, model-tools.ts).
  const modelTools = buildModelTools(set, tools, policies.inventory.names);
  const batch: BatchDeps = {
    controls,
    tools,
    decide: {
      commandTools: commandToolShapes(policies),
      ...(core.classifierModel.ok
        ? {
            classify: admitClassifier(meters, used, (command: string) =>
              classifyWith(core, command, entry.controller.signal, state.classifierSpend),
            ),
          }
        : {}),
    },
    ...(core.redactor === undefined ? {} : { redactor: core.redactor }),
    signal: entry.controller.signal,
    workspace: core.workspace,
    owner: { callerId: caller.id, runId: run.id },
    now,
    recorder: trackOpened(
      createToolCallRecorder({
        db,
        runId: run.id,
        segment: run.segments,
        actor: `caller:${caller.name}`,
        now,
      }),
      onCallsRecorded,
      core.meter,
    ),
    emit: (event) => core.emit(input.onEvent, event),
    logger: core.logger,
    takeRecordId: (toolCallId) => {
      // The model's id names the call's row: keep it storable (no NUL) and short.
      const base = storableText((toolCallId || "call").slice(0, 200));
      let id = base;
      for (let n = 2; recordIds.has(id); n++) id = `${base}#${n}`;
      recordIds.add(id);
      return id;
    },
    maxConcurrency: core.maxToolConcurrency,
    defaultTimeoutMs: core.toolTimeoutMs,
    stopGraceMs: core.toolStopGraceMs,
  };
  try {
    return await runSegment({
      model: model.model,
      price: startable.price,
      instructions: policies.agent.instructions,
      tools: modelTools.tools,
      renamed: modelTools.renamed,
      batch,
      meters,
      used,
      messages,
      signal: entry.controller.signal,
      maxRetries: core.maxRetries,
      stream: input.stream !== false,
      logger: core.logger,
      ...(input.resume && "answer" in input.resume
        ? { resume: { answer: input.resume.answer } }
        : input.resume && run.pendingBatch
          ? { resume: { batch: run.pendingBatch, decision: input.resume.decision } }
          : {}),
      canAskCaller: run.origin === "a2a",
      chargeStep: (delta) => {
        unflushed.tokens += delta.tokens;
        unflushed.costUsd += delta.costUsd;
      },
      flushUsage: async () => {
        const delta = { ...unflushed };
        unflushed.tokens = 0;
        unflushed.costUsd = 0;
        await chargeStep(db, {
          runId: run.id,
          callerId: caller.id,
          instanceId,
          day: formatUtcDay(now()),
          used,
          delta,
          at: now(),
        });
      },
      checkBetweenSteps: () => checkBetweenSteps(core, entry, narrow),
      checkpoint: () => saveMessages(db, run.id, instanceId, messages, now()),
      onTextDelta: (delta) => core.emit(input.onEvent, { type: "text-delta", delta }),
    });
  } finally {
    cancelDeadline();
  }
}

/**
 * The between-steps check: a stop recorded for the run (a cancel, a revocation), or its caller
 * revoked, stops it before the step's tools run, whether or not the notification that says so
 * ever arrives here. A revocation outranks a cancel.
 */
export async function checkBetweenSteps(
  core: RunCore,
  entry: ActiveRun,
  onCaller?: (caller: Caller) => void,
): Promise<void> {
  const request = await readStopRequest(core.db, {
    runId: entry.runId,
    callerId: entry.callerId,
  });
  if (request.stop?.kind === "revoked" || !request.caller || isCallerRevoked(request.caller)) {
    core.active.stop(entry, { kind: "revoked", message: revokedStopReason });
  } else if (request.stop) {
    core.active.stop(entry, { kind: "cancel", message: request.stop.reason });
  } else {
    // The caller as it is now: a narrower tier, allow list, policy, override or allowlist holds
    // from this step; a wider one never reaches the run (run-controls.ts).
    onCaller?.(request.caller);
  }
}

/** Ends a waiting run at once (canceled, or revoked with its caller); undefined if not waiting. */
export async function closeParkedRunNow(
  core: RunCore,
  runId: string,
  reason: StopReason,
): Promise<RunOutcome | undefined> {
  const closed = await core.db.transaction(async (tx) => {
    const locked = await lockRun(tx, runId);
    if (!locked || !isWaitingStatus(locked.status)) return false;
    const ids = await closeParkedRuns(tx, {
      runs: [locked],
      ...(reason.kind === "revoked"
        ? {
            status: "revoked" as const,
            error: { code: "caller-revoked", message: reason.message },
          }
        : { status: "canceled" as const, error: { code: "canceled", message: reason.message } }),
      actor: `instance:${core.instanceId}`,
      at: core.now(),
    });
    return ids.length > 0;
  });
  if (!closed) return undefined;
  const current = await readRun(core.db, runId);
  return current ? outcomeOf(current) : undefined;
}

/**
 * A cancel or revocation that came while the run was parking or starting to wait for its caller
 * still ends it: one heard here (`entry.reason`) or one recorded in the database (`recorded`; a
 * recorded revocation outranks a cancel heard here). A shutdown or deadline does not: a waiting
 * run holds no instance and spends no wall time. Undefined: the run waits on.
 */
async function closeIfStoppedMeanwhile(
  core: RunCore,
  entry: ActiveRun,
  input: SegmentInput,
  recorded: RecordedStop | undefined,
): Promise<SegmentResult | undefined> {
  const heard =
    entry.reason?.kind === "cancel" || entry.reason?.kind === "revoked" ? entry.reason : undefined;
  const reason: StopReason | undefined =
    recorded?.kind === "revoked"
      ? { kind: "revoked", message: recorded.reason }
      : (heard ?? (recorded ? { kind: "cancel", message: recorded.reason } : undefined));
  if (!reason) return undefined;
  const closed = await closeParkedRunNow(core, input.run.id, reason);
  if (!closed) return undefined;
  core.emit(input.onEvent, { type: "status", status: closed.status });
  return { outcome: closed };
}

/** Another instance moved the run on (it thought this one dead): report what it recorded. */
async function settleTakenOver(
  core: RunCore,
  run: Run,
  input: SegmentInput,
): Promise<SegmentResult> {
  core.logger.warn("a run was taken over before this instance could record it", { runId: run.id });
  const current = await readRun(core.db, run.id);
  const outcome = outcomeOf(current ?? run);
  core.emit(input.onEvent, { type: "status", status: outcome.status });
  return { outcome, takenOver: true };
}

/**
 * The recorder, telling `onOpen` when a segment records its first tool call, and the meter each
 * status a call's record is given (other than running) once it is written.
 */
function trackOpened(
  recorder: ToolCallRecorder,
  onOpen: () => void,
  meter: RunMeter,
): ToolCallRecorder {
  return {
    ...recorder,
    async open(rows) {
      if (rows.length > 0) onOpen();
      await recorder.open(rows);
      for (const row of rows) {
        if (row.status !== "running") meter.toolCallRecorded(row.status, row.code);
      }
    },
    async finish(recordId, end) {
      await recorder.finish(recordId, end);
      meter.toolCallRecorded(end.status, end.code);
    },
  };
}
