// One HTTP(S) POST to an operator's notify target through the egress guard (createEgress,
// src/net/egress.ts) web_fetch uses, as A2A push deliveries go: http(s) only, no credentials in the
// URL, the host resolved here and every address it resolves to public (a listed exemption
// aside, never a metadata address), the socket handed the judged address and its peer checked
// before the answer counts. Redirects are not followed: a notice goes where it was configured.
import { createEgress, EgressError, type ResolvedAddress } from "../net/egress.ts";

export type SafePostOptions = {
  /** Private addresses exempted, as written (an intranet target); metadata addresses never are. */
  readonly allowAddresses?: readonly string[];
  readonly timeoutMs?: number;
  /** Injected by tests; default: the system resolver. */
  readonly resolve?: (hostname: string) => Promise<readonly ResolvedAddress[]>;
};

export type SafePostResult = { ok: true; status: number } | { ok: false; reason: string };

export async function safePost(
  target: URL,
  body: string,
  headers: Record<string, string>,
  options: SafePostOptions = {},
): Promise<SafePostResult> {
  const egress = createEgress({
    purpose: "a parked-run notice",
    maxBytes: 4_096,
    ...(options.allowAddresses ? { allowAddresses: options.allowAddresses } : {}),
    ...(options.resolve ? { resolve: options.resolve } : {}),
  });
  const signal = AbortSignal.timeout(options.timeoutMs ?? 10_000);
  try {
    const hop = await egress.planHop(target, signal);
    const response = await egress.fetchHop(hop, signal, {
      method: "POST",
      headers: {
        ...headers,
        "content-length": String(Buffer.byteLength(body)),
        "user-agent": "peergate-notify/0.1",
      },
      body,
    });
    return response.status >= 200 && response.status < 300
      ? { ok: true, status: response.status }
      : { ok: false, reason: `HTTP ${response.status}` };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return {
      ok: false,
      reason: error instanceof EgressError ? error.message : (code ?? "failed"),
    };
  }
}
