// Who owns a running MCP server. A server keeps whatever state it likes between calls, so one
// instance is never shared between callers: each caller gets its own (a server declared
// `scope: run` gets one per run), started on the caller's first call to it. An instance is closed
// when it has been idle for its server's `idleTimeoutMs`, when its caller is revoked, when its run
// segment ends (`scope: run`), when the tool runtime that declared it closes, and at shutdown.
//
// One set of instances serves every tool runtime of the process (a policy reload builds a new
// runtime; runs that started before it keep the old one), so a caller's revocation reaches every
// generation and `maxInstances` counts a server's instances across them. At the bound the
// longest-idle instance of that server is closed to make room; when every one is busy the call
// fails at once, saying so: waiting would hold a run's step for a slot another caller may keep for
// the whole call timeout, and the model can try again.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Logger } from "../../log.ts";
import { quoteUntrusted } from "../../policy/quote.ts";
import { ToolCallError } from "../tool-call-error.ts";
import type { CallOwner } from "../types.ts";

export const mcpInstanceDefaults = {
  idleTimeoutMs: 300_000,
  maxInstances: 16,
};

/** Whose instance a call uses: its caller's, or its run's for a server declared `scope: run`. */
export type McpCallScope = CallOwner;

/** One declared server of one tool runtime: how to start an instance, and its bounds. */
export type McpServerSlot = {
  readonly name: string;
  readonly scope: "caller" | "run";
  readonly idleTimeoutMs: number;
  readonly maxInstances: number;
  /**
   * Starts and connects an instance; `onExit` is called if it goes away on its own. `stop` is
   * aborted when the instance is stopped before it connected: the start is abandoned and its
   * process killed.
   */
  open(onExit: () => void, stop: AbortSignal): Promise<Client>;
};

export type McpInstances = {
  /** Runs `work` with this scope's instance of the server, started if there is none. */
  use<T>(
    slot: McpServerSlot,
    generation: object,
    scope: McpCallScope,
    work: (client: Client) => Promise<T>,
  ): Promise<T>;
  /** Closes every instance a caller owns (revocation), in every generation. */
  closeCaller(callerId: string): Promise<void>;
  /** Closes the instances of one run (its segment ended). */
  closeRun(runId: string): Promise<void>;
  /** Closes the instances of one tool runtime (it is closing). */
  closeGeneration(generation: object): Promise<void>;
  /** Closes everything; later calls fail. */
  close(): Promise<void>;
  /** Instances alive or starting, for tests and the bench. */
  readonly live: number;
};

type Instance = {
  readonly key: string;
  readonly server: string;
  readonly generation: object;
  readonly callerId: string;
  readonly runId: string | undefined;
  readonly client: Promise<Client>;
  /** Aborted when the instance is stopped: a start still under way is abandoned. */
  readonly stopping: AbortController;
  busy: number;
  idleSince: number;
  idleTimer: NodeJS.Timeout | undefined;
};

export function createMcpInstances(options: {
  readonly logger: Logger;
  readonly clock?: () => number;
}): McpInstances {
  const clock = options.clock ?? (() => performance.now());
  const instances = new Map<string, Instance>();
  const generationIds = new WeakMap<object, number>();
  let nextGeneration = 0;
  let closed = false;

  const generationId = (generation: object): number => {
    let id = generationIds.get(generation);
    if (id === undefined) {
      id = nextGeneration++;
      generationIds.set(generation, id);
    }
    return id;
  };

  const stop = async (instance: Instance, why: string): Promise<void> => {
    if (instances.get(instance.key) === instance) instances.delete(instance.key);
    clearTimeout(instance.idleTimer);
    // One still starting is not waited for: its start is abandoned, its process killed.
    instance.stopping.abort();
    const client = await instance.client.catch(() => undefined);
    if (client === undefined) return;
    options.logger.info("mcp server closed", { mcpServer: instance.server, why });
    await client.close().catch(() => undefined);
  };

  const stopWhere = async (matches: (instance: Instance) => boolean, why: string) => {
    const chosen = [...instances.values()].filter(matches);
    await Promise.all(chosen.map((instance) => stop(instance, why)));
  };

  /** Makes room for one more instance of `slot`, or says why there is none. */
  const makeRoom = (slot: McpServerSlot) => {
    const same = [...instances.values()].filter((i) => i.server === slot.name);
    if (same.length < slot.maxInstances) return;
    const idle = same.filter((i) => i.busy === 0).sort((a, b) => a.idleSince - b.idleSince);
    const excess = same.length - slot.maxInstances + 1;
    if (idle.length < excess) {
      throw new ToolCallError(
        "failed",
        `The MCP server ${quoteUntrusted(slot.name)} is running its limit of ${slot.maxInstances} instances and every one is busy; try again shortly (an operator can raise maxInstances in tools.yaml).`,
      );
    }
    for (const instance of idle.slice(0, excess)) void stop(instance, "room for another caller");
  };

  const start = (slot: McpServerSlot, generation: object, key: string, scope: McpCallScope) => {
    makeRoom(slot);
    let instance: Instance;
    const stopping = new AbortController();
    const client = slot.open(() => {
      // It exited on its own: the next call starts a fresh one.
      if (instances.get(key) === instance) void stop(instance, "exited");
    }, stopping.signal);
    instance = {
      key,
      server: slot.name,
      generation,
      callerId: scope.callerId,
      runId: slot.scope === "run" ? scope.runId : undefined,
      client,
      stopping,
      busy: 0,
      idleSince: clock(),
      idleTimer: undefined,
    };
    instances.set(key, instance);
    // A failed start leaves no instance behind: the next call tries again.
    client.catch(() => {
      if (instances.get(key) === instance) instances.delete(key);
    });
    return instance;
  };

  return {
    async use(slot, generation, scope, work) {
      if (closed) throw new ToolCallError("failed", "The tool runtime is closed.");
      const owner = slot.scope === "run" ? `run:${scope.runId}` : `caller:${scope.callerId}`;
      const key = `${generationId(generation)}\0${slot.name}\0${owner}`;
      const instance = instances.get(key) ?? start(slot, generation, key, scope);
      instance.busy += 1;
      clearTimeout(instance.idleTimer);
      try {
        return await work(await instance.client);
      } finally {
        instance.busy -= 1;
        if (instance.busy === 0 && instances.get(key) === instance) {
          instance.idleSince = clock();
          instance.idleTimer = setTimeout(() => {
            if (instance.busy === 0) void stop(instance, "idle");
          }, slot.idleTimeoutMs);
          instance.idleTimer.unref();
        }
      }
    },
    closeCaller: (callerId) => stopWhere((i) => i.callerId === callerId, "caller revoked"),
    closeRun: (runId) => stopWhere((i) => i.runId === runId, "run segment ended"),
    closeGeneration: (generation) =>
      stopWhere((i) => i.generation === generation, "tool runtime closed"),
    async close() {
      closed = true;
      await stopWhere(() => true, "shutdown");
    },
    get live() {
      return instances.size;
    },
  };
}
