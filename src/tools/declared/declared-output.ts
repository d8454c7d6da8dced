// What leaves a declared tool: output cut at its byte bound (flagged), terminal control
// sequences stripped (CSI, OSC and other escapes, C0 and C1 controls but tab and newline), and
// every secret peergate holds or the tool's secretArgs read replaced by value. The same filter
// serves the final result, the live progress of `stream: sanitized` and the rationale.
import { createHash } from "node:crypto";
import type { Redactor } from "../../sandbox/redact.ts";

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping terminal controls is the point
const escapes = /\u001b(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|[@-Z\\-_])/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping terminal controls is the point
const controls = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** Text with terminal control sequences and control characters removed. */
export function stripTerminal(text: string): string {
  return text.replace(escapes, "").replace(controls, "");
}

/** Bytes as safe text: decoded, stripped, redacted; a marker where the bound cut it. */
export function finalizeOutput(bytes: Buffer, total: number, redactor: Redactor): string {
  const cut = total > bytes.length;
  const text = redactor.redact(stripTerminal(bytes.toString("utf8")), { cut });
  return cut ? `${text}\n[output truncated: ${total - bytes.length} more bytes not shown]` : text;
}

export function sha256Hex(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Combines redactors: each one's secrets are replaced. */
export function chainRedactors(redactors: readonly (Redactor | undefined)[]): Redactor {
  const present = redactors.filter((r): r is Redactor => r !== undefined && r.size > 0);
  return {
    size: present.reduce((n, r) => n + r.size, 0),
    redact: (text, options) => present.reduce((t, r) => r.redact(t, options), text),
  };
}

/**
 * Live progress for `stream: sanitized`: chunks decoded without splitting a UTF-8 sequence,
 * stripped and redacted, published until `maxBytes` have been sent (then one marker, then
 * nothing). A secret split across two chunks is held back until the next chunk or the end.
 */
export function createProgressStream(
  publish: (text: string) => void,
  redactor: Redactor,
  maxBytes: number,
  holdBack: number,
): { write(chunk: Buffer): void; end(): void } {
  const decoder = new TextDecoder("utf-8", { fatal: false });
  let sent = 0;
  let pending = "";
  let done = false;
  const emit = (text: string) => {
    if (done || text === "") return;
    const room = maxBytes - sent;
    const bytes = Buffer.byteLength(text);
    if (bytes > room) {
      publish(`${Buffer.from(text).subarray(0, room).toString("utf8")}\n[progress truncated]`);
      done = true;
      return;
    }
    sent += bytes;
    publish(text);
  };
  return {
    write(chunk) {
      // Redacted before splitting: a whole secret is replaced, a partial one stays in the tail.
      pending = redactor.redact(stripTerminal(pending + decoder.decode(chunk, { stream: true })));
      if (pending.length <= holdBack) return;
      emit(pending.slice(0, pending.length - holdBack));
      pending = pending.slice(pending.length - holdBack);
    },
    end() {
      emit(redactor.redact(stripTerminal(pending + decoder.decode())));
      pending = "";
    },
  };
}
