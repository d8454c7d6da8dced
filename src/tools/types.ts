// The contract between tool implementations (src/tools/) and the run engine (src/runs/). A tool
// never decides whether it may run: the executor has already checked the call against the run's
// effective set (src/policy/check-tool-call.ts) before it gets here. A tool only does its job,
// inside the workspace, bounded in time and output, and stops when `signal` aborts.
import type { z } from "zod";
import type { UrlGrants } from "../policy/url-grants.ts";
import type { AllowEntry } from "../shell/command-key.ts";

export type ToolCallContext = {
  /** Aborted on cancel, revocation, deadline or shutdown: stop at once, kill child processes. */
  readonly signal: AbortSignal;
  /** Absolute, symlink-resolved workspace root; every path a tool touches stays inside it. */
  readonly workspace: string;
  /** The model's id for this call (for logs and process names), never trusted for anything. */
  readonly callId: string;
  readonly now: () => Date;
  /**
   * The run making the call and its caller. A tool that keeps state between calls (an MCP
   * server) keeps it per caller or per run by these, never across callers; without them it refuses.
   */
  readonly run?: CallOwner;
  /**
   * web_fetch run under a URL grant: every redirect hop must stay inside these grants; a hop
   * outside stops the fetch with code `outsideUrlGrantCode` and the executor asks for it.
   */
  readonly urlGrants?: UrlGrants;
  /**
   * Declared chain tools: the caller's command allowlist entries and, when the engine can ask,
   * a way to have one stage approved on its own. Absent: the call's own approval covers it all.
   */
  readonly commands?: CommandGate;
  /** Declared command tools: each stage's audit trail (allowed or refused, started, exited). */
  readonly onStage?: (event: StageEvent) => void;
  /** Bounded, sanitized live output of a `stream: sanitized` tool (the engine publishes it). */
  readonly progress?: (text: string) => void;
};

/** Whose call it is: the caller and the run. */
export type CallOwner = { readonly callerId: string; readonly runId: string };

/** One chain stage asking to run: what it runs, exactly, and its fingerprint. */
export type StageRequest = {
  readonly tool: string;
  readonly argv: readonly string[];
  readonly executable: string;
  readonly executableSha256: string;
  /** SHA-256 of the manifest, executable, its hash and argv: what an approval binds to. */
  readonly fingerprint: string;
  readonly reason: string;
};

export type CommandGate = {
  readonly entries: readonly AllowEntry[];
  /** Fingerprints of stages an operator approved for this call. */
  readonly approved?: readonly string[];
  /**
   * True when the engine can park the run: an uncovered stage nobody approved stops the call with
   * a `StageParking` failure (code `stageApprovalCode`) saying where it stopped, instead of a refusal.
   */
  readonly park?: boolean;
  /** Carry on from where a parked call stopped (the checkpoint its `StageParking` carried). */
  readonly resume?: StageCheckpoint;
  approveStage?(stage: StageRequest): Promise<boolean>;
};

/**
 * Where a chain stopped for a stage: the pipeline it stopped before and what ran so far (its
 * output already filtered and redacted). Plain JSON, opaque to the engine, stored in the approval.
 */
export type StageCheckpoint = { readonly item: number; readonly state: Record<string, unknown> };

/** The failure code of a call that stopped before a stage an operator must approve. */
export const stageApprovalCode = "stage-approval";

/** A call stopped before an uncovered stage: the engine parks the run on `stage`. */
export type StageParking = ToolFailure & {
  readonly code: typeof stageApprovalCode;
  readonly stage: StageRequest;
  readonly checkpoint: StageCheckpoint;
};

/** One stage's audit event; `arguments` shows declared secrets masked. */
export type StageEvent = {
  readonly event: "allowed" | "refused" | "parked" | "started" | "exited";
  readonly tool: string;
  readonly program: string;
  readonly arguments: readonly string[];
  readonly executable: string;
  readonly executableSha256: string;
  readonly fingerprint: string;
  readonly reason?: string;
  readonly status?: Record<string, unknown>;
};

export function isStageParking(result: ToolResult): result is StageParking {
  return (
    !isApprovalRequest(result) &&
    !result.ok &&
    result.code === stageApprovalCode &&
    "checkpoint" in result
  );
}

/** The failure code of a fetch that stopped at a redirect outside the caller's URL grants. */
export const outsideUrlGrantCode = "outside-url-grant";

/** A finished call. `content` is what the model sees next. */
export type ToolSuccess = {
  readonly ok: true;
  readonly content: string | Record<string, unknown>;
  /** True when output was cut at a bound; the model is told. */
  readonly truncated?: boolean;
};

/** A failed call: the run goes on and the model sees `error`. */
export type ToolFailure = {
  readonly ok: false;
  /** Stable: `refused`, `not-found`, `timeout`, `too-large`, `invalid-input`, `failed`, `interrupted` … */
  readonly code: string;
  readonly error: string;
  readonly truncated?: boolean;
};

/**
 * The first half of a two-phase tool: what it would do, with a real diff, having changed nothing.
 * Honoured only when it comes from the tool registered to make it (checkApprovalRequest).
 */
export type ApprovalRequest = {
  readonly kind: "approval-request";
  readonly executeToolName: string;
  readonly executeArgs: Record<string, unknown>;
  /** One line for the operator: what will happen. */
  readonly summary: string;
  readonly previewDiff?: string;
};

export type ToolResult = ToolSuccess | ToolFailure | ApprovalRequest;

export type ToolImplementation = {
  /** Canonical name, as in the inventory. */
  readonly name: string;
  /** What the model is told the tool does. */
  readonly description: string;
  /** Arguments, validated before `execute` is called; also the JSON schema the model sees. */
  readonly inputSchema: z.ZodType;
  /** Default 60 s. A call past it fails with code `timeout`; the run goes on. */
  readonly timeoutMs?: number;
  execute(args: unknown, invocation: ToolCallContext): Promise<ToolResult>;
  /** Two-phase tools: the hidden half, run only by the approval path with the request's args. */
  readonly executeHalf?: {
    readonly name: string;
    readonly inputSchema: z.ZodType;
    /** Default: the tool's own `timeoutMs`. A command's half runs far longer than its proposal. */
    readonly timeoutMs?: number;
    execute(args: unknown, invocation: ToolCallContext): Promise<ToolSuccess | ToolFailure>;
  };
  /**
   * Declared command tools: true once a script or pinned program was found changed since load;
   * the tool then refuses every call until a policy reload builds it again (src/policy-reload.ts).
   */
  changedSinceLoad?(): boolean;
};

/** Every implemented tool of this process, by canonical name. */
export type ToolRuntime = {
  readonly tools: ReadonlyMap<string, ToolImplementation>;
  /**
   * The resolved workspace root (realpath) the tools are confined to; pass it as
   * `ToolCallContext.workspace`. File tools refuse a call whose context names another root.
   */
  readonly workspace?: string;
  /** Stops MCP servers and anything else the runtime started. Idempotent. */
  close(): Promise<void>;
  /** Closes what the caller's calls started and kept (its MCP server instances): it was revoked. */
  releaseCaller?(callerId: string): Promise<void>;
  /** Closes what one run's calls kept (MCP servers declared `scope: run`): its segment ended. */
  releaseRun?(runId: string): Promise<void>;
};

export function isApprovalRequest(result: ToolResult): result is ApprovalRequest {
  return (result as ApprovalRequest).kind === "approval-request";
}
