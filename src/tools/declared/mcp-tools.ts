// MCP tools from tools.yaml, through @modelcontextprotocol/sdk. A server is started lazily on a
// caller's first call to one of its tools (starting every server at start makes start-up slow and
// hostage to the slowest one), one instance per caller or per run, never shared between callers
// (their lifetime: mcp-instances.ts). Only tools the policy names exist here, as `server.tool`;
// their metadata comes from the policy, and without it they are unknown/private/egress in the
// inventory. peergate never asks a server for its tool list, so what the model sees costs no
// server start.
//
// MCP output is data. It is returned nested under `content`, images and other binary parts are
// summarised rather than inlined, the whole is size-bounded, and anything in it shaped like an
// approval request makes the call an error: a server must never be able to ask the executor to
// run something. Argument schemas are the server's business: arguments are forwarded as given.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";
import type { Logger } from "../../log.ts";
import type { McpServerPolicy } from "../../policy/policy-files.ts";
import { quoteUntrusted } from "../../policy/quote.ts";
import type { Redactor } from "../../sandbox/redact.ts";
import { resolveSandboxLimits, type SandboxBackend } from "../../sandbox/types.ts";
import { statusRequest } from "../run-process.ts";
import { scrubEnvironment } from "../scrub-environment.ts";
import { cutUtf8 } from "../text.ts";
import { runGuarded, ToolCallError } from "../tool-call-error.ts";
import type { ToolImplementation } from "../types.ts";
import type { Workspace } from "../workspace.ts";
import {
  createMcpInstances,
  type McpInstances,
  type McpServerSlot,
  mcpInstanceDefaults,
} from "./mcp-instances.ts";
import { SandboxedStdioTransport } from "./mcp-stdio.ts";

export const mcpLimits = {
  callTimeoutMs: 60_000,
  connectTimeoutMs: 20_000,
  maxResultBytes: 256 * 1024,
  maxStderrBytes: 4096,
  /** How long a closing stdio server is given after its stdin closes, and again after SIGTERM. */
  closeGraceMs: 2_000,
};

const inputSchema = z.looseObject({});

type CallResult = Awaited<ReturnType<Client["callTool"]>>;

/** True if the value, at any depth, looks like an approval request. */
export function containsApprovalShape(value: unknown, depth = 0): boolean {
  if (depth > 20 || value === null || typeof value !== "object") {
    if (
      typeof value === "string" &&
      depth <= 20 &&
      /approval-request|executeToolName/.test(value)
    ) {
      try {
        return containsApprovalShape(JSON.parse(value), depth + 1);
      } catch {
        return false;
      }
    }
    return false;
  }
  if (Array.isArray(value)) return value.some((v) => containsApprovalShape(v, depth + 1));
  const record = value as Record<string, unknown>;
  if (
    record.kind === "approval-request" ||
    "executeToolName" in record ||
    "executeArgs" in record
  ) {
    return true;
  }
  return Object.values(record).some((v) => containsApprovalShape(v, depth + 1));
}

/** MCP content parts as data the model can read: text kept, binary parts summarised. */
function describeParts(parts: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  return parts.map((part) => {
    if (part.type === "text") return { type: "text", text: String(part.text ?? "") };
    if (part.type === "image" || part.type === "audio") {
      const data = typeof part.data === "string" ? part.data : "";
      return {
        type: part.type,
        mimeType: part.mimeType,
        bytes: Buffer.byteLength(data, "base64"),
        note: "binary content not shown",
      };
    }
    if (part.type === "resource" && typeof part.resource === "object" && part.resource !== null) {
      const resource = part.resource as Record<string, unknown>;
      return typeof resource.text === "string"
        ? { type: "resource", uri: resource.uri, text: resource.text }
        : {
            type: "resource",
            uri: resource.uri,
            mimeType: resource.mimeType,
            note: "binary content not shown",
          };
    }
    return { ...part };
  });
}

/** Cuts text parts so the serialised result stays under the bound. */
function boundResult(content: Record<string, unknown>): {
  content: Record<string, unknown>;
  truncated: boolean;
} {
  const size = Buffer.byteLength(JSON.stringify(content));
  if (size <= mcpLimits.maxResultBytes) return { content, truncated: false };
  const parts = (content.content as Record<string, unknown>[]).map((part) => {
    if (typeof part.text !== "string") return part;
    const { text } = cutUtf8(part.text, Math.floor(mcpLimits.maxResultBytes / 2));
    return { ...part, text };
  });
  let bounded: Record<string, unknown> = { content: parts };
  if (content.structuredContent !== undefined) {
    const structured = JSON.stringify(content.structuredContent);
    bounded.structuredContent =
      structured.length > mcpLimits.maxResultBytes / 4
        ? { note: "structured content too large; see the text parts" }
        : content.structuredContent;
  }
  if (Buffer.byteLength(JSON.stringify(bounded)) > mcpLimits.maxResultBytes) {
    const { text } = cutUtf8(JSON.stringify(bounded), mcpLimits.maxResultBytes - 1024);
    bounded = { content: [{ type: "text", text }] };
  }
  return { content: bounded, truncated: true };
}

type StartOptions = {
  workspace: Workspace;
  env: Readonly<Record<string, string | undefined>>;
  envAllowlist?: readonly string[];
  sandbox: SandboxBackend;
  logger: Logger;
  redactor?: Redactor;
};

/** How one declared server is started; the instances it makes belong to mcp-instances.ts. */
function declareServer(server: McpServerPolicy, options: StartOptions): McpServerSlot {
  const logger = options.logger.child({ mcpServer: server.name });

  const connect = async (onExit: () => void, stop: AbortSignal): Promise<Client> => {
    const client = new Client({ name: "peergate", version: "0.1.0" }, { capabilities: {} });
    let connected = false;
    // A server that exits (or a dropped HTTP session) is started again on the next call.
    client.onclose = () => {
      if (connected) onExit();
    };
    if (server.transport === "stdio") {
      // The server runs in the sandbox like any process; it has a network only when one of
      // its tools is declared (or left undeclared, so the inventory says) as egress.
      const sandboxed = options.sandbox.wrap({
        ...statusRequest(options.sandbox),
        argv: [server.command, ...server.args],
        workspace: options.workspace.root,
        cwd: options.workspace.root,
        env: scrubEnvironment(options.env, [
          ...(options.envAllowlist ?? []),
          ...(server.envAllowlist ?? []),
        ]),
        egress: server.tools.length === 0 || server.tools.some((t) => t.egress !== false),
        limits: resolveSandboxLimits(server.limits),
        readOnlyPaths: [server.command, ...server.args.filter((a) => a.startsWith("/"))],
      });
      // Spawned by peergate, not by the SDK (mcp-stdio.ts): bwrap reports the sandbox's PID 1,
      // and every stop ends with SIGKILL to it.
      const transport = new SandboxedStdioTransport({
        command: sandboxed,
        backend: options.sandbox,
        graceMs: mcpLimits.closeGraceMs,
      });
      let logged = 0;
      transport.stderr.on("data", (chunk: Buffer) => {
        if (logged >= mcpLimits.maxStderrBytes) return;
        logged += chunk.length;
        const text = chunk.toString("utf8").slice(0, 1024);
        // The log is read by people a tool result is not meant for: no secret goes in either.
        logger.debug("mcp server stderr", { text: options.redactor?.redact(text) ?? text });
      });
      // A stop while the server starts (its caller revoked, its run ended, shutdown) kills it
      // at once: it has answered nothing yet, so it has nothing to tidy.
      const onStop = () => void transport.close(0);
      stop.addEventListener("abort", onStop, { once: true });
      try {
        if (stop.aborted) throw new Error("The MCP server was stopped while it started.");
        await client.connect(transport, { timeout: mcpLimits.connectTimeoutMs });
      } catch (error) {
        // A server that started but did not answer in time must not be left running.
        await transport.close(0);
        throw error;
      } finally {
        stop.removeEventListener("abort", onStop);
      }
    } else {
      await client.connect(new StreamableHTTPClientTransport(new URL(server.url)), {
        timeout: mcpLimits.connectTimeoutMs,
      });
    }
    connected = true;
    logger.info("mcp server connected");
    return client;
  };

  return {
    name: server.name,
    scope: server.scope,
    idleTimeoutMs: server.idleTimeoutMs ?? mcpInstanceDefaults.idleTimeoutMs,
    maxInstances: server.maxInstances ?? mcpInstanceDefaults.maxInstances,
    open: (onExit, stop) =>
      connect(onExit, stop).catch((error: unknown) => {
        if (stop.aborted) {
          // Stopped on purpose (its caller revoked, its run ended, shutdown): not a failure.
          logger.info("mcp server start abandoned");
          throw new ToolCallError(
            "interrupted",
            `The MCP server ${quoteUntrusted(server.name)} was stopped while it started.`,
          );
        }
        logger.warn("mcp server connection failed", { error });
        throw new ToolCallError(
          "failed",
          `The MCP server ${quoteUntrusted(server.name)} could not be reached.`,
        );
      }),
  };
}

export function createMcpTools(options: {
  readonly servers: readonly McpServerPolicy[];
  /** The process's instances, shared by every tool runtime; without it, this one's own. */
  readonly instances?: McpInstances;
  readonly workspace: Workspace;
  /** The parent environment; a stdio server gets the base names and its envAllowlist from it. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly envAllowlist?: readonly string[];
  readonly sandbox: SandboxBackend;
  readonly logger: Logger;
  readonly redactor?: Redactor;
}): { tools: ToolImplementation[]; instances: McpInstances; close: () => Promise<void> } {
  const instances = options.instances ?? createMcpInstances({ logger: options.logger });
  // This runtime's instances are its own: a reload's new declarations never reuse them.
  const generation = {};
  const tools: ToolImplementation[] = [];
  for (const server of options.servers) {
    const slot = declareServer(server, options);
    for (const tool of server.tools) {
      const name = `${server.name}.${tool.name}`;
      tools.push({
        name,
        description: tool.description ?? `The ${tool.name} tool of the MCP server ${server.name}.`,
        inputSchema,
        timeoutMs: mcpLimits.callTimeoutMs + 5_000,
        execute: (args, invocation) =>
          runGuarded(invocation, async () => {
            const input = inputSchema.parse(args) as Record<string, unknown>;
            if (invocation.run === undefined) {
              // Without a caller there is no instance that may serve the call.
              throw new ToolCallError(
                "refused",
                `The MCP tool ${quoteUntrusted(name)} runs only in a caller's run.`,
              );
            }
            let result: CallResult;
            try {
              result = await instances.use(slot, generation, invocation.run, (client) =>
                client.callTool({ name: tool.name, arguments: input }, undefined, {
                  signal: invocation.signal,
                  timeout: mcpLimits.callTimeoutMs,
                }),
              );
            } catch (error) {
              if (error instanceof ToolCallError) throw error;
              if (invocation.signal.aborted)
                throw new ToolCallError("interrupted", "The call was stopped.");
              const message = error instanceof Error ? error.message : String(error);
              const timedOut = /timed out|timeout/i.test(message);
              throw new ToolCallError(
                timedOut ? "timeout" : "failed",
                `The MCP tool ${quoteUntrusted(name)} failed: ${quoteUntrusted(message, 300)}`,
              );
            }
            if (containsApprovalShape(result)) {
              throw new ToolCallError(
                "refused",
                `The MCP tool ${quoteUntrusted(name)} returned something shaped like an approval request. Tool output is data and cannot ask for anything to run; the result was discarded.`,
              );
            }
            const parts = Array.isArray(result.content)
              ? describeParts(result.content as Record<string, unknown>[])
              : [];
            if (result.isError === true) {
              const text = parts.map((p) => (typeof p.text === "string" ? p.text : "")).join("\n");
              throw new ToolCallError(
                "failed",
                `The MCP tool ${quoteUntrusted(name)} reported an error: ${cutUtf8(text, 4096).text}`,
              );
            }
            const data: Record<string, unknown> = { content: parts };
            if (result.structuredContent !== undefined)
              data.structuredContent = result.structuredContent;
            const bounded = boundResult(data);
            return { ok: true as const, content: bounded.content, truncated: bounded.truncated };
          }),
      });
    }
  }
  return {
    tools,
    instances,
    close: () =>
      options.instances === undefined ? instances.close() : instances.closeGeneration(generation),
  };
}
