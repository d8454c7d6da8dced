// How long peergate keeps each family of rows (docs/operating.md, "Retention"). A family is a
// set of tables pruned together because one guards the other's meaning: a run with its tool calls
// and notices, a task with its push configs. `null` days: the family is never pruned. Nothing
// here has a side effect. The defaults are src/config.ts's (`defaultRetentionDays`).

export const retentionFamilies = [
  "runs",
  "tasks",
  "push-deliveries",
  "webhook-claims",
  "jti-claims",
  "audit",
] as const;
export type RetentionFamily = (typeof retentionFamilies)[number];

/** Days each family is kept; null: kept for ever. */
export type RetentionDays = Readonly<Record<RetentionFamily, number | null>>;

export type RetentionSettings = {
  readonly days: RetentionDays;
  /** Pause between scheduled prunes; 0: only `peergate prune --apply` prunes. */
  readonly intervalMs: number;
  /** Rows per DELETE statement: short statements, short locks. */
  readonly batchSize: number;
};

/** What one family's prune found (dry run) or deleted (applied). */
export type FamilyPrune = {
  family: RetentionFamily;
  /** null: the family's retention is off. */
  days: number | null;
  /** Rows older than the cutoff that may be deleted (dry run), or deleted (applied). */
  rows: number;
  /** The oldest row it keeps counting from: rows created before this go. */
  cutoff: string | null;
};

/** A prune over every family. */
export type PruneReport = {
  applied: boolean;
  families: FamilyPrune[];
  /** The audit checkpoint written before the audit prefix was deleted, if one was. */
  checkpoint: { seq: number; hash: string } | null;
  durationMs: number;
};
