// Where a push notification may go. Two checks, both at registration and again before every
// delivery (grants can be narrowed and DNS can change between the two):
//
// 1. the caller's push grants (`caller_push_hosts`, none by default): URL grant entries in the
//    forms src/policy/url-grants.ts reads — a host (default ports), a `.suffix`, or a URL prefix
//    (which pins scheme, host, port and path, e.g. `https://hooks.example.com:8443/a2a`);
// 2. the egress guard web_fetch uses (createEgress in src/net/egress.ts): the host must
//    resolve to public addresses only, and the connection goes to the address judged. Loopback,
//    private and link-local addresses pass only when the operator lists them
//    (`PEERGATE_PUSH_ALLOW_ADDRESSES`); cloud metadata addresses never do.
import { eq } from "drizzle-orm";
import type { DbOrTx } from "../db/client.ts";
import { callerPushHosts } from "../db/schema.ts";
import { createEgress, EgressError, type EgressOptions, type Hop } from "../net/egress.ts";
import { compilePushGrants } from "../policy/push-grants.ts";
import { checkUrlGrant } from "../policy/url-grants.ts";

export type PushEgress = ReturnType<typeof createEgress>;

export type PushTargetCheck = { ok: true; url: URL; hop: Hop } | { ok: false; reason: string };

/** The push egress: web_fetch's guard, with the operator's exempted addresses. */
export function createPushEgress(
  options: Pick<EgressOptions, "allowAddresses" | "resolve"> = {},
): PushEgress {
  return createEgress({
    purpose: "a push notification",
    allowAddresses: options.allowAddresses ?? [],
    maxBytes: 16 * 1024,
    ...(options.resolve ? { resolve: options.resolve } : {}),
  });
}

/** The caller's push grant entries, as stored. */
export async function loadPushHosts(db: DbOrTx, callerId: string): Promise<string[]> {
  const rows = await db
    .select({ entry: callerPushHosts.entry })
    .from(callerPushHosts)
    .where(eq(callerPushHosts.callerId, callerId));
  return rows.map((r) => r.entry).sort();
}

/** Both checks of the module comment for one URL; never throws. */
export async function checkPushTarget(
  db: DbOrTx,
  egress: PushEgress,
  callerId: string,
  target: string,
  signal: AbortSignal = AbortSignal.timeout(5_000),
): Promise<PushTargetCheck> {
  return checkPushTargetWith(await loadPushHosts(db, callerId), egress, target, signal);
}

/** `checkPushTarget` with the caller's grant entries already read. */
export async function checkPushTargetWith(
  entries: readonly string[],
  egress: PushEgress,
  target: string,
  signal: AbortSignal,
): Promise<PushTargetCheck> {
  const url = URL.parse(target);
  if (url === null || (url.protocol !== "https:" && url.protocol !== "http:")) {
    return { ok: false, reason: "the push notification url must be an http(s) URL" };
  }
  const grant = checkUrlGrant(url, compilePushGrants(entries));
  if (!grant.granted) {
    return {
      ok: false,
      reason: `the push notification url is outside the hosts this caller may notify (${grant.reason})`,
    };
  }
  try {
    return { ok: true, url, hop: await egress.planHop(url, signal) };
  } catch (error) {
    if (error instanceof EgressError) return { ok: false, reason: error.message };
    return { ok: false, reason: "the push notification host could not be resolved" };
  }
}
