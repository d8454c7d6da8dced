// What this instance counts for /metrics, as it happens: run segments ending, tool calls recorded
// (told by the run engine through its RunMeter), authentication failures and revocations (told by
// src/core.ts). src/metrics.ts subscribes and keeps the counters; a scrape reads memory, never the
// database. The counts are this instance's since it started (sum them across instances).
import type { RunMeter, SegmentEnded } from "./runs/types.ts";

export type InstanceEvent =
  | { readonly kind: "segment-ended"; readonly ended: SegmentEnded }
  | { readonly kind: "tool-call"; readonly status: string; readonly code: string | undefined }
  | { readonly kind: "auth-failure"; readonly surface: string }
  | { readonly kind: "revocation" };

export type InstanceEvents = RunMeter & {
  authFailed(surface: string): void;
  callerRevoked(): void;
  subscribe(listener: (event: InstanceEvent) => void): () => void;
};

export function createInstanceEvents(): InstanceEvents {
  const listeners = new Set<(event: InstanceEvent) => void>();
  const tell = (event: InstanceEvent) => {
    for (const listener of listeners) listener(event);
  };
  return {
    segmentEnded: (ended) => tell({ kind: "segment-ended", ended }),
    toolCallRecorded: (status, code) => tell({ kind: "tool-call", status, code }),
    authFailed: (surface) => tell({ kind: "auth-failure", surface }),
    callerRevoked: () => tell({ kind: "revocation" }),
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
