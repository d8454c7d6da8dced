// Single use of a peer JWT: each (issuer, jti) is claimed once, in `jwt_replays`, until the token
// expires. One INSERT per request made every JWT request a transaction of its own — the commit, not
// the signature check, bounded the JWT path (bench/auth.ts). Claims are grouped instead: the first
// claim goes out at once; claims that arrive while a group is in flight wait for it and go out
// together as the next one, one `INSERT … SELECT FROM json_to_recordset(…) ON CONFLICT DO NOTHING RETURNING`.
// So an idle server claims with the same one round trip as before, and a busy one commits once
// per group rather than once per request. Nothing is claimed that is not committed: a claim
// answers only from its group's RETURNING, after the statement committed; a group that fails
// fails each of its claims (the request is refused as unavailable, never let through).
//
// Within a group, a jti sent twice is claimed by its first request only: the second is answered
// "already used" without being sent (PostgreSQL would skip it anyway, since ON CONFLICT DO NOTHING
// sees the first row of the same statement).
import { lt, sql } from "drizzle-orm";
import { type Db, selectRows } from "../db/client.ts";
import { jwtReplays } from "../db/schema.ts";

type Claim = {
  issuer: string;
  jti: string;
  expiresAt: Date;
  resolve: (claimed: boolean) => void;
  reject: (error: unknown) => void;
};

export type JtiClaimer = {
  /** Claims (issuer, jti) until `expiresAt`; false when it was claimed before. */
  claim(issuer: string, jti: string, expiresAt: Date): Promise<boolean>;
};

/** Most claims in one statement (a busy server's group). */
const maxGroup = 500;

/** How often, per group, the claims that expired are swept. */
const sweepChance = 0.01;

export function createJtiClaimer(db: Db, now: () => Date): JtiClaimer {
  let waiting: Claim[] = [];
  let inFlight = false;

  const send = async (group: Claim[]) => {
    const first = new Map<string, Claim>();
    const repeats: Claim[] = [];
    for (const claim of group) {
      const key = `${claim.issuer}\u0000${claim.jti}`;
      if (first.has(key)) repeats.push(claim);
      else first.set(key, claim);
    }
    const unique = [...first.values()];
    try {
      const rows = await selectRows<{ issuer: string; jti: string }>(
        db,
        // The group as one JSON parameter: the same text statement (prepared once) at any size.
        sql`insert into jwt_replays (issuer, jti, expires_at)
            select issuer, jti, expires_at from json_to_recordset(${JSON.stringify(
              unique.map((c) => ({
                issuer: c.issuer,
                jti: c.jti,
                expires_at: c.expiresAt.toISOString(),
              })),
            )}::json) as g(issuer text, jti text, expires_at timestamptz)
            on conflict do nothing
            returning issuer, jti`,
      );
      const claimed = new Set(rows.map((r) => `${r.issuer}\u0000${r.jti}`));
      for (const [key, claim] of first) claim.resolve(claimed.has(key));
      for (const claim of repeats) claim.resolve(false);
    } catch (error) {
      for (const claim of group) claim.reject(error);
    }
    if (Math.random() < sweepChance) {
      // Not waited for: the next group does not queue behind the sweep.
      db.delete(jwtReplays)
        .where(lt(jwtReplays.expiresAt, now()))
        .then(
          () => {},
          () => {},
        );
    }
  };

  const drain = async () => {
    inFlight = true;
    try {
      while (waiting.length > 0) {
        const group = waiting.slice(0, maxGroup);
        waiting = waiting.slice(group.length);
        await send(group);
      }
    } finally {
      inFlight = false;
    }
  };

  return {
    claim(issuer, jti, expiresAt) {
      return new Promise<boolean>((resolve, reject) => {
        waiting.push({ issuer, jti, expiresAt, resolve, reject });
        if (!inFlight) void drain();
      });
    },
  };
}
