// One HTTP(S) POST to an operator's notify target, under web_fetch's rules against server-side
// request forgery (src/tools/net/web-fetch.ts): http(s) only, no credentials in the URL, the host
// resolved here and every address it resolves to public (src/tools/net/ip-address.ts), the socket
// handed the address that was judged (no second resolution to rebind) and its peer compared with
// it before the answer counts. Redirects are not followed: a notice goes where it was configured.
import { lookup as dnsLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction, type Socket } from "node:net";
import { judgeAddress, normalizeAddress } from "../tools/net/ip-address.ts";

export type SafePostOptions = {
  /** Private addresses exempted, as written (an intranet target); metadata addresses never are. */
  readonly allowAddresses?: readonly string[];
  readonly timeoutMs?: number;
  /** Injected by tests; default: the system resolver. */
  readonly resolve?: (hostname: string) => Promise<readonly { address: string }[]>;
};

export type SafePostResult = { ok: true; status: number } | { ok: false; reason: string };

export async function safePost(
  target: URL,
  body: string,
  headers: Record<string, string>,
  options: SafePostOptions = {},
): Promise<SafePostResult> {
  const exempt = new Set(
    (options.allowAddresses ?? []).map((a) => normalizeAddress(a)).filter((a) => a !== undefined),
  );
  if (target.protocol !== "http:" && target.protocol !== "https:") {
    return { ok: false, reason: `only http and https targets, not ${target.protocol}` };
  }
  if (target.username !== "" || target.password !== "") {
    return { ok: false, reason: "a target URL carries no user name or password" };
  }
  const bare = target.hostname.startsWith("[") ? target.hostname.slice(1, -1) : target.hostname;
  let addresses: string[];
  if (isIP(bare) !== 0) addresses = [bare];
  else {
    try {
      const resolve =
        options.resolve ?? ((h: string) => dnsLookup(h, { all: true, verbatim: true }));
      addresses = (await resolve(bare)).map((a) => a.address);
    } catch {
      return { ok: false, reason: `the host ${bare} could not be resolved` };
    }
  }
  if (addresses.length === 0) return { ok: false, reason: `the host ${bare} has no addresses` };
  // Every answer must pass: a name that also resolves privately is refused.
  for (const address of addresses) {
    const verdict = judgeAddress(address);
    if (verdict.allowed) continue;
    const normalized = normalizeAddress(address);
    if (!verdict.metadata && normalized !== undefined && exempt.has(normalized)) continue;
    return { ok: false, reason: `the host ${bare} leads to ${address}, ${verdict.reason}` };
  }
  const address = addresses[0] as string;
  const family = isIP(address) === 6 ? 6 : 4;
  const expected = normalizeAddress(address);
  const secure = target.protocol === "https:";

  return new Promise<SafePostResult>((resolvePromise) => {
    let settled = false;
    const settle = (result: SafePostResult) => {
      if (settled) return;
      settled = true;
      resolvePromise(result);
    };
    const pinnedLookup: LookupFunction = (_hostname, lookupOptions, callback) => {
      if ((lookupOptions as { all?: boolean }).all === true) {
        (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
          { address, family },
        ]);
      } else callback(null, address, family);
    };
    const peerIsChecked = (socket: Socket): boolean => {
      const actual =
        socket.remoteAddress === undefined ? undefined : normalizeAddress(socket.remoteAddress);
      if (actual !== undefined && actual === expected) return true;
      settle({ ok: false, reason: `the connection reached ${socket.remoteAddress ?? "?"}` });
      request.destroy();
      return false;
    };
    const request = (secure ? https : http).request({
      protocol: target.protocol,
      hostname: bare,
      port: target.port === "" ? undefined : Number(target.port),
      path: `${target.pathname}${target.search}`,
      method: "POST",
      headers: {
        ...headers,
        host: target.host,
        "content-length": String(Buffer.byteLength(body)),
        "user-agent": "peergate-notify/0.1",
        connection: "close",
      },
      lookup: pinnedLookup,
      family,
      agent: false,
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      ...(secure && isIP(bare) === 0 ? { servername: bare } : {}),
    });
    request.on("socket", (socket: Socket) => socket.once("connect", () => peerIsChecked(socket)));
    request.on("error", (error) =>
      settle({ ok: false, reason: (error as NodeJS.ErrnoException).code ?? error.message }),
    );
    request.on("response", (response) => {
      if (!peerIsChecked(response.socket)) return;
      response.resume();
      response.on("end", () => {
        const status = response.statusCode ?? 0;
        settle(
          status >= 200 && status < 300
            ? { ok: true, status }
            : { ok: false, reason: `HTTP ${status}` },
        );
      });
      response.on("error", () => settle({ ok: false, reason: "the answer broke off" }));
    });
    request.end(body);
  });
}
