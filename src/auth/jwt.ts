// Peer JWTs, per RFC 8725. Every caller names its own allowlist of asymmetric algorithms (never
// `none`, never HS*: a shared secret would have to be stored readable), its issuer and audience,
// and its key — inline JWK/PEM, or a JWKS URL fetched with caching and a cooldown. The token's own
// `jku`, `x5u`, `jwk` and `x5c` headers are never used; `kid` only selects among configured keys.
// `exp`, `iat` and `jti` are required, the age is bounded, and each `jti` is claimed once.
import {
  createRemoteJWKSet,
  decodeProtectedHeader,
  errors,
  exportJWK,
  generateKeyPair,
  importJWK,
  importSPKI,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";

export const jwtAlgorithms = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
] as const;
export type JwtAlgorithm = (typeof jwtAlgorithms)[number];

export type PeerJwtSettings = {
  issuer: string;
  audience: string;
  algorithms: readonly JwtAlgorithm[];
  /** Exactly one of these. */
  jwksUrl?: string;
  publicKey?: JWK | string;
  /** Oldest acceptable `iat`, and the longest acceptable exp − iat. Default 300 s, at most 3600. */
  maxAgeSeconds?: number;
  /** At most 60 s. Default 30 s. */
  clockToleranceSeconds?: number;
  /** If set, the header `typ` must equal it (e.g. "JWT" or "at+jwt"). */
  typ?: string;
};

export type JwtFailure =
  | "malformed"
  | "algorithm-not-allowed"
  | "bad-signature"
  | "claim-invalid"
  | "expired"
  | "too-old"
  | "lifetime-too-long"
  | "replayed"
  | "key-unavailable"
  | "not-configured";

export type JwtResult =
  | { ok: true; payload: JWTPayload & { jti: string; exp: number; iat: number } }
  | { ok: false; reason: JwtFailure; detail: string };

export type JwtDeps = {
  now: Date;
  /** Claims (issuer, jti) until `expiresAt`; false when it was already claimed. */
  claimJti(issuer: string, jti: string, expiresAt: Date): Promise<boolean>;
  keySets: JwksCache;
};

export type JwksCache = { get(url: string): JWTVerifyGetKey };

/** Remote key sets, one per URL, shared by every caller that names it. */
export function createJwksCache(
  options: { cacheMaxAgeMs?: number; cooldownMs?: number; timeoutMs?: number } = {},
): JwksCache {
  const sets = new Map<string, JWTVerifyGetKey>();
  return {
    get(url) {
      let set = sets.get(url);
      if (!set) {
        set = createRemoteJWKSet(new URL(url), {
          cacheMaxAge: options.cacheMaxAgeMs ?? 10 * 60_000,
          cooldownDuration: options.cooldownMs ?? 30_000,
          timeoutDuration: options.timeoutMs ?? 5_000,
        });
        sets.set(url, set);
      }
      return set;
    },
  };
}

const maxAgeCeiling = 3600;
const toleranceCeiling = 60;

async function resolveKey(
  settings: PeerJwtSettings,
  deps: JwtDeps,
): Promise<JWTVerifyGetKey | Awaited<ReturnType<typeof importSPKI>> | undefined> {
  if (settings.jwksUrl) return deps.keySets.get(settings.jwksUrl);
  const key = settings.publicKey;
  if (key === undefined) return undefined;
  const alg = settings.algorithms[0];
  let imported: Awaited<ReturnType<typeof importJWK>>;
  if (typeof key === "string") {
    if (!alg) return undefined;
    imported = await importOnce(`${alg}\n${key}`, () => importSPKI(key, alg));
  } else {
    const jwkAlg = key.alg ?? alg;
    imported = await importOnce(`${jwkAlg}\n${JSON.stringify(key)}`, () => importJWK(key, jwkAlg));
  }
  if (imported instanceof Uint8Array) return undefined; // a symmetric key: refused by design
  return imported;
}

/**
 * Public keys as imported, by algorithm and key text: importing a key costs more than checking a
 * signature with it (bench/auth.ts), and a caller's key is the same on each request. The key text
 * is the cache key, so a changed key is imported anew; a failed import is not kept.
 */
const importedKeys = new Map<string, Promise<Awaited<ReturnType<typeof importJWK>>>>();
const maxImportedKeys = 256;

function importOnce(
  cacheKey: string,
  load: () => Promise<Awaited<ReturnType<typeof importJWK>>>,
): Promise<Awaited<ReturnType<typeof importJWK>>> {
  const known = importedKeys.get(cacheKey);
  if (known) return known;
  const loading = load();
  importedKeys.set(cacheKey, loading);
  loading.catch(() => importedKeys.delete(cacheKey));
  if (importedKeys.size > maxImportedKeys) {
    const oldest = importedKeys.keys().next().value;
    if (oldest !== undefined) importedKeys.delete(oldest);
  }
  return loading;
}

export async function verifyPeerJwt(
  token: string,
  settings: PeerJwtSettings,
  deps: JwtDeps,
): Promise<JwtResult> {
  const algorithms = settings.algorithms.filter((a) => jwtAlgorithms.includes(a));
  if (algorithms.length === 0) {
    return { ok: false, reason: "not-configured", detail: "no allowed algorithm configured" };
  }
  const maxAge = Math.min(settings.maxAgeSeconds ?? 300, maxAgeCeiling);
  const tolerance = Math.min(settings.clockToleranceSeconds ?? 30, toleranceCeiling);
  let key: Awaited<ReturnType<typeof resolveKey>>;
  try {
    key = await resolveKey({ ...settings, algorithms }, deps);
  } catch (error) {
    return { ok: false, reason: "key-unavailable", detail: describe(error) };
  }
  if (!key) return { ok: false, reason: "not-configured", detail: "no usable public key" };

  let payload: JWTPayload;
  try {
    const options = {
      algorithms: [...algorithms],
      issuer: settings.issuer,
      audience: settings.audience,
      requiredClaims: ["exp", "iat", "jti"],
      maxTokenAge: maxAge,
      clockTolerance: tolerance,
      currentDate: deps.now,
      ...(settings.typ ? { typ: settings.typ } : {}),
    };
    const result =
      typeof key === "function"
        ? await jwtVerify(token, key, options)
        : await jwtVerify(token, key, options);
    payload = result.payload;
  } catch (error) {
    return { ok: false, ...classify(error) };
  }
  const { exp, iat, jti } = payload;
  if (typeof exp !== "number" || typeof iat !== "number" || typeof jti !== "string" || !jti) {
    return { ok: false, reason: "claim-invalid", detail: "exp, iat and jti are required" };
  }
  if (jti.length > 256) return { ok: false, reason: "claim-invalid", detail: "jti too long" };
  if (exp - iat > maxAge + tolerance) {
    return {
      ok: false,
      reason: "lifetime-too-long",
      detail: `exp − iat is ${exp - iat}s; at most ${maxAge}s is accepted`,
    };
  }
  const claimed = await deps.claimJti(settings.issuer, jti, new Date((exp + tolerance) * 1000));
  if (!claimed) return { ok: false, reason: "replayed", detail: "jti already used" };
  return { ok: true, payload: { ...payload, exp, iat, jti } };
}

/** One public key per algorithm, whose private half was thrown away: nothing verifies under it. */
const paddingKeys = new Map<JwtAlgorithm, Promise<JWK>>();

function paddingKey(alg: JwtAlgorithm): Promise<JWK> {
  let key = paddingKeys.get(alg);
  if (!key) {
    key = generateKeyPair(alg, { extractable: true }).then((pair) => exportJWK(pair.publicKey));
    paddingKeys.set(alg, key);
  }
  return key;
}

/**
 * Does the work verifying `token` would do for a known issuer — import a key of the token's
 * algorithm, check the signature — against a padding key it cannot match. An unknown, ambiguous
 * or revoked issuer then takes as long to refuse as a known issuer with a bad signature (without
 * it, about 0.5 ms less: test/security/jwt.security.test.ts), so timing does not tell a prober
 * which issuers peergate knows. Always fails; never claims a jti.
 */
export async function padPeerJwtVerification(token: string, now: Date): Promise<void> {
  let alg: unknown;
  try {
    alg = decodeProtectedHeader(token).alg;
  } catch {
    return; // a known issuer's token fails here as fast
  }
  if (!jwtAlgorithms.includes(alg as JwtAlgorithm)) return; // refused before any crypto too
  const publicKey = await paddingKey(alg as JwtAlgorithm);
  await verifyPeerJwt(
    token,
    {
      issuer: "urn:peergate:padding",
      audience: "urn:peergate:padding",
      algorithms: [alg as JwtAlgorithm],
      publicKey,
    },
    {
      now,
      claimJti: async () => false,
      keySets: {
        get() {
          throw new Error("the padding key is inline");
        },
      },
    },
  );
}

function classify(error: unknown): { reason: JwtFailure; detail: string } {
  const detail = describe(error);
  if (error instanceof errors.JWTExpired) return { reason: "expired", detail };
  if (error instanceof errors.JOSEAlgNotAllowed) return { reason: "algorithm-not-allowed", detail };
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return { reason: "bad-signature", detail };
  if (error instanceof errors.JWTClaimValidationFailed) {
    return error.claim === "iat" && /maxTokenAge/i.test(error.message)
      ? { reason: "too-old", detail }
      : { reason: "claim-invalid", detail };
  }
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSTimeout)
    return { reason: "key-unavailable", detail };
  return { reason: "malformed", detail };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
