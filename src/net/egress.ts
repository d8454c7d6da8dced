// The egress guard: the one way peergate opens a connection to a URL someone else chose (web_fetch,
// push notifications, notices about parked runs). Server-side request forgery is the threat: a
// URL (or a redirect, or a DNS answer) that points the request at this machine, its network or a
// cloud metadata service. So for every hop the scheme and host lists are checked, the host is
// resolved here, every address it resolves to must be public, and the connection is made to that
// checked address (a `lookup` hook hands the socket the address we judged, so there is no second
// resolution to rebind), and the address the socket actually connected to is compared with it
// before the response is read. Requests never carry credentials, cookies or compression (no
// decompression bombs). A refused or unreachable target is an EgressError; each sender turns it
// into its own failure (a tool result, a delivery's reason, a notice's outcome).
import { lookup as dnsLookup } from "node:dns/promises";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { isIP, type LookupFunction, type Socket } from "node:net";
import { quoteUntrusted } from "../policy/quote.ts";
import { judgeAddress, normalizeAddress } from "./ip-address.ts";

/** Why a target was not reached: refused by the guard, or its host has no address. */
export class EgressError extends Error {
  readonly code: "refused" | "not-found";
  constructor(code: "refused" | "not-found", message: string) {
    super(message);
    this.name = "EgressError";
    this.code = code;
  }
}

export type ResolvedAddress = { readonly address: string; readonly family?: number };

/** Most response bytes read by default (the rest is cut and flagged truncated). */
export const defaultEgressMaxBytes = 512 * 1024;

export type EgressOptions = {
  /** When non-empty, only these hosts (exact, or `*.example.com` for subdomains). */
  readonly allowHosts?: readonly string[];
  /** Never these hosts (same forms); checked before allowHosts. */
  readonly denyHosts?: readonly string[];
  /** Most response bytes read (default 512 KiB); the rest is cut and flagged truncated. */
  readonly maxBytes?: number;
  /** Resolves a host name to addresses; default: the system resolver. Injected by tests. */
  readonly resolve?: (hostname: string) => Promise<readonly ResolvedAddress[]>;
  /**
   * Addresses exempted from the private-address refusal, exactly as written (an intranet host
   * the operator means to reach; tests use 127.0.0.1 for a loopback server). Cloud metadata
   * addresses are never exempted.
   */
  readonly allowAddresses?: readonly string[];
  /** Who connects, for refusal messages: a tool's name, "a push notification". */
  readonly purpose: string;
};

function matchHost(host: string, entry: string): boolean {
  const pattern = entry.trim().toLowerCase().replace(/\.$/, "");
  if (pattern.startsWith("*.")) return host.endsWith(pattern.slice(1));
  return host === pattern;
}

function refuse(message: string): EgressError {
  return new EgressError("refused", message);
}

export type Hop = {
  readonly url: URL;
  readonly hostname: string;
  readonly address: string;
  readonly family: 4 | 6;
};

export type HopResponse = {
  readonly status: number;
  readonly headers: IncomingMessage["headers"];
  readonly body: Buffer;
  readonly truncated: boolean;
};

/** What one guarded request sends besides GET's defaults (push notifications POST a body). */
export type EgressRequest = {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Buffer;
};

/**
 * The SSRF-safe egress (module comment), for any sender that must reach only public
 * addresses: `planHop` checks one URL and resolves it; `fetchHop` connects to the address it
 * judged and checks the connected peer before reading. Both throw EgressError for
 * a refused target.
 */
export function createEgress(options: EgressOptions) {
  const purpose = options.purpose;
  const maxBytes = options.maxBytes ?? defaultEgressMaxBytes;
  const resolve =
    options.resolve ?? ((hostname: string) => dnsLookup(hostname, { all: true, verbatim: true }));
  const exempt = new Set(
    (options.allowAddresses ?? []).map((a) => normalizeAddress(a)).filter((a) => a !== undefined),
  );
  const allowHosts = options.allowHosts ?? [];
  const denyHosts = options.denyHosts ?? [];

  /** Checks one address; exemptions apply to anything but metadata endpoints. */
  const checkAddress = (address: string, host: string): 4 | 6 => {
    const verdict = judgeAddress(address);
    if (verdict.allowed) return verdict.family;
    const normalized = normalizeAddress(address);
    if (!verdict.metadata && normalized !== undefined && exempt.has(normalized)) {
      return isIP(address) === 6 ? 6 : 4;
    }
    throw refuse(
      `The host ${quoteUntrusted(host)} leads to ${quoteUntrusted(address)}, ${verdict.reason}; ${purpose} only reaches public addresses.`,
    );
  };

  /** Everything about one URL before a connection is made. */
  const planHop = async (url: URL, signal: AbortSignal): Promise<Hop> => {
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw refuse(`Only http and https URLs are fetched, not ${quoteUntrusted(url.protocol)}.`);
    }
    if (url.username !== "" || url.password !== "") {
      throw refuse("URLs with a user name or password are not fetched.");
    }
    const bare = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    const host = bare.toLowerCase().replace(/\.$/, "");
    if (host === "") throw refuse("The URL has no host.");
    if (denyHosts.some((entry) => matchHost(host, entry))) {
      throw refuse(`The host ${quoteUntrusted(host)} is on the operator's deny list.`);
    }
    if (allowHosts.length > 0 && !allowHosts.some((entry) => matchHost(host, entry))) {
      throw refuse(`The host ${quoteUntrusted(host)} is not on the operator's allow list.`);
    }
    if (isIP(bare) !== 0) {
      return { url, hostname: bare, address: bare, family: checkAddress(bare, host) };
    }
    if (host === "localhost" || host.endsWith(".localhost")) {
      throw refuse(
        `The host ${quoteUntrusted(host)} is this machine; ${purpose} only reaches public addresses.`,
      );
    }
    let answers: readonly ResolvedAddress[];
    try {
      answers = await raceAbort(resolve(bare), signal);
    } catch (error) {
      if (signal.aborted) throw error;
      throw new EgressError("not-found", `The host ${quoteUntrusted(host)} could not be resolved.`);
    }
    if (answers.length === 0) {
      throw new EgressError("not-found", `The host ${quoteUntrusted(host)} has no addresses.`);
    }
    // Every answer must pass, not just the first: a name that also resolves privately is refused.
    let chosen: { address: string; family: 4 | 6 } | undefined;
    for (const answer of answers) {
      const family = checkAddress(answer.address, host);
      chosen ??= { address: answer.address, family };
    }
    if (chosen === undefined)
      throw refuse(`The host ${quoteUntrusted(host)} has no usable address.`);
    return { url, hostname: bare, ...chosen };
  };

  const fetchHop = (
    hop: Hop,
    signal: AbortSignal,
    send: EgressRequest = {},
  ): Promise<HopResponse> =>
    new Promise((resolvePromise, reject) => {
      const expected = normalizeAddress(hop.address);
      const secure = hop.url.protocol === "https:";
      // The socket gets the address we judged, never a fresh DNS answer.
      const pinnedLookup: LookupFunction = (_hostname, lookupOptions, callback) => {
        if ((lookupOptions as { all?: boolean }).all === true) {
          (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(
            null,
            [{ address: hop.address, family: hop.family }],
          );
        } else callback(null, hop.address, hop.family);
      };
      const checkPeer = (socket: Socket): boolean => {
        const actual =
          socket.remoteAddress === undefined ? undefined : normalizeAddress(socket.remoteAddress);
        if (actual !== undefined && actual === expected) return true;
        request.destroy(
          refuse(
            `The connection for ${quoteUntrusted(hop.hostname)} reached ${quoteUntrusted(socket.remoteAddress ?? "an unknown address")} instead of the checked address; nothing was read.`,
          ),
        );
        return false;
      };
      const request = (secure ? https : http).request({
        protocol: hop.url.protocol,
        hostname: hop.hostname,
        port: hop.url.port === "" ? undefined : Number(hop.url.port),
        path: `${hop.url.pathname}${hop.url.search}`,
        method: send.method ?? "GET",
        headers: {
          "user-agent": "peergate-web-fetch/0.1",
          accept: "text/html,application/xhtml+xml,application/json,text/plain;q=0.9,*/*;q=0.5",
          ...send.headers,
          host: hop.url.host,
          "accept-encoding": "identity",
          connection: "close",
        },
        lookup: pinnedLookup,
        family: hop.family,
        agent: false,
        signal,
        ...(secure && isIP(hop.hostname) === 0 ? { servername: hop.hostname } : {}),
      });
      request.on("socket", (socket: Socket) => {
        socket.once("connect", () => checkPeer(socket));
      });
      request.on("error", reject);
      request.on("response", (response) => {
        if (!checkPeer(response.socket)) return;
        const chunks: Buffer[] = [];
        let received = 0;
        let truncated = false;
        const finish = () =>
          resolvePromise({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks),
            truncated,
          });
        response.on("data", (chunk: Buffer) => {
          if (truncated) return;
          const room = maxBytes - received;
          if (chunk.length > room) {
            chunks.push(chunk.subarray(0, room));
            received = maxBytes;
            truncated = true;
            finish();
            request.destroy();
            return;
          }
          chunks.push(chunk);
          received += chunk.length;
        });
        response.on("end", () => {
          if (!truncated) finish();
        });
        response.on("error", (error) => {
          if (!truncated) reject(error);
        });
      });
      request.end(send.body);
    });

  return { planHop, fetchHop };
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
