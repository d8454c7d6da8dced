// Authentication benchmark: `npm exec -- node bench/auth.ts [--seconds N] [--trials N]`.
//
// 1. Throughput of an authenticated no-op request (peer bearer token; peer JWT with its jti
//    claimed in Postgres) next to a bare Hono handler, measured in the same run against the same
//    real PostgreSQL, and reported as a ratio. Target: bearer ≥ 70 % of the bare handler.
// 2. Revocation propagation between two instances sharing that PostgreSQL: revoke on A, then ask
//    B until it answers 401; p50/p99 over the trials. Target: p99 under 50 ms.
// Prints markdown tables. Needs PostgreSQL on the machine (initdb/pg_ctl); loopback only.
import type { AddressInfo } from "node:net";
import { parseArgs } from "node:util";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { createJwksCache } from "../src/auth/jwt.ts";
import { generateSecretKeyText, parseSecretKey } from "../src/auth/sealed-secrets.ts";
import { openDatabase } from "../src/db/client.ts";
import { migrateDatabase } from "../src/db/migrate.ts";
import { UnauthenticatedError } from "../src/errors.ts";
import { loadPolicies } from "../src/load-policies.ts";
import { silentLogger } from "../src/log.ts";
import { createCeilingCache } from "../src/policy/ceiling-cache.ts";
import { addCaller } from "../src/services/add-caller.ts";
import { type AuthDeps, authenticatePeer } from "../src/services/authenticate-caller.ts";
import { openCallerDirectory } from "../src/services/caller-directory.ts";
import type { ServiceContext } from "../src/services/context.ts";
import { revokeCaller } from "../src/services/revoke-caller.ts";
import { startPostgresCluster } from "../test/support/postgres-cluster.ts";
import { percentile, runLoad } from "./load.ts";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "3" },
    rounds: { type: "string", default: "3" },
    trials: { type: "string", default: "100" },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const trials = Number(values.trials);
const connections = 16;

const cluster = await startPostgresCluster();
const policies = await loadPolicies(new URL("../policies", import.meta.url).pathname);
const key = parseSecretKey(generateSecretKeyText());
if (!key) throw new Error("key");

async function openInstance() {
  const database = await openDatabase({ kind: "postgres", url: cluster.adminUrl });
  await migrateDatabase(database);
  const directory = await openCallerDirectory({ database, logger: silentLogger });
  const services: ServiceContext = {
    database,
    db: database.db,
    now: () => new Date(),
    logger: silentLogger,
    policies,
    ceilings: createCeilingCache(),
    secretKey: key as NonNullable<typeof key>,
    publicUrl: "http://127.0.0.1",
    callerChanged: (e) => directory.forget(e.callerId),
  };
  const auth: AuthDeps = { services, directory, jwks: createJwksCache() };
  const app = new Hono();
  app.get("/bare", (c) => c.body(null, 204));
  app.get("/auth", async (c) => {
    try {
      await authenticatePeer(auth, c.req.header("authorization"), {
        surface: "a2a",
        source: "bench",
      });
      return c.body(null, 204);
    } catch (error) {
      if (error instanceof UnauthenticatedError) return c.body(null, 401);
      throw error;
    }
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const waitTrusted = async () => {
    for (let i = 0; i < 500 && !directory.trusted; i++) await new Promise((r) => setTimeout(r, 10));
  };
  await waitTrusted();
  return {
    services,
    auth,
    url,
    async close() {
      await new Promise<void>((r) => server.close(() => r()));
      await directory.close();
      await database.close();
    },
  };
}

const a = await openInstance();
const b = await openInstance();
try {
  const { credential } = await addCaller({
    services: a.services,
    input: { name: "bench", kind: "peer" },
    actor: "admin",
  });
  const keys = await generateKeyPair("ES256", { extractable: true });
  await addCaller({
    services: a.services,
    input: {
      name: "bench-jwt",
      kind: "peer",
      jwt: {
        issuer: "https://bench.example",
        audience: "peergate",
        algorithms: ["ES256"],
        jwk: await exportJWK(keys.publicKey),
      },
    },
    actor: "admin",
  });
  const jwts: string[] = [];
  const jwtCount = Math.ceil(seconds * rounds * 3000);
  for (let i = 0; i < jwtCount; i++) {
    jwts.push(
      await new SignJWT({ jti: `bench-${i}` })
        .setProtectedHeader({ alg: "ES256" })
        .setIssuer("https://bench.example")
        .setAudience("peergate")
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(keys.privateKey),
    );
  }

  const durationMs = seconds * 1000;
  // Warm-up so every path has JIT-compiled code and a warm cache.
  await runLoad({ url: `${a.url}/bare`, connections, durationMs: 500 });
  await runLoad({
    url: `${a.url}/auth`,
    connections,
    durationMs: 500,
    headers: () => ({ authorization: `Bearer ${credential?.secret}` }),
  });
  // Rounds alternate the three handlers so drift on a shared machine hits them alike; each row is
  // the median round. JWTs are single-use (jti), so every request carries a fresh one.
  let jwtIndex = 0;
  const handlers = {
    bare: () => runLoad({ url: `${a.url}/bare`, connections, durationMs }),
    bearer: () =>
      runLoad({
        url: `${a.url}/auth`,
        connections,
        durationMs,
        headers: () => ({ authorization: `Bearer ${credential?.secret}` }),
      }),
    jwt: () =>
      runLoad({
        url: `${a.url}/auth`,
        connections,
        durationMs,
        headers: () => ({ authorization: `Bearer ${jwts[jwtIndex++ % jwts.length]}` }),
      }),
  };
  const results: Record<keyof typeof handlers, Awaited<ReturnType<typeof runLoad>>[]> = {
    bare: [],
    bearer: [],
    jwt: [],
  };
  for (let round = 0; round < rounds; round++) {
    for (const name of Object.keys(handlers) as (keyof typeof handlers)[])
      results[name].push(await handlers[name]());
  }
  const median = (list: Awaited<ReturnType<typeof runLoad>>[]) =>
    [...list].sort((x, y) => x.perSecond - y.perSecond)[Math.floor(list.length / 2)] as Awaited<
      ReturnType<typeof runLoad>
    >;
  const bare = median(results.bare);
  const row = (name: string, r: typeof bare) =>
    `| ${name} | ${Math.round(r.perSecond)} | ${(r.perSecond / bare.perSecond).toFixed(2)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${JSON.stringify(r.statuses)} |`;
  console.log(
    `\n### Authenticated no-op throughput (${connections} connections, median of ${rounds} alternating rounds of ${seconds} s, real PostgreSQL, Node ${process.version})\n`,
  );
  console.log("| handler | req/s | ratio to bare | p50 ms | p99 ms | statuses (median round) |");
  console.log("|---|---:|---:|---:|---:|---|");
  console.log(row("bare Hono handler", bare));
  console.log(row("peer bearer token", median(results.bearer)));
  console.log(row("peer JWT (jti claimed in Postgres)", median(results.jwt)));
  console.log(
    `\nrounds (req/s): bare ${results.bare.map((r) => Math.round(r.perSecond)).join(", ")}; bearer ${results.bearer.map((r) => Math.round(r.perSecond)).join(", ")}; jwt ${results.jwt.map((r) => Math.round(r.perSecond)).join(", ")}`,
  );

  // Revocation propagation: A revokes, B is asked until it refuses.
  const samples: number[] = [];
  const afterCommit: number[] = [];
  for (let t = 0; t < trials; t++) {
    const name = `prop-${t}`;
    const { credential: cred } = await addCaller({
      services: a.services,
      input: { name, kind: "peer" },
      actor: "admin",
    });
    const headers = { authorization: `Bearer ${cred?.secret}` };
    // Warm B until it answers from its cache.
    for (let i = 0; i < 50 && b.auth.directory.size === 0; i++)
      await fetch(`${b.url}/auth`, { headers });
    const before = b.auth.directory.size;
    const t0 = performance.now();
    await revokeCaller({ services: a.services, name, actor: "admin" });
    const committed = performance.now();
    for (;;) {
      const res = await fetch(`${b.url}/auth`, { headers });
      if (res.status === 401) break;
      if (performance.now() - t0 > 5_000) throw new Error("B never refused the revoked caller");
    }
    samples.push(performance.now() - t0);
    afterCommit.push(performance.now() - committed);
    if (before === 0) console.error(`trial ${t}: B's cache was cold`);
  }
  samples.sort((x, y) => x - y);
  afterCommit.sort((x, y) => x - y);
  const stat = (list: number[]) =>
    `${percentile(list, 50).toFixed(2)} | ${percentile(list, 99).toFixed(2)} | ${(list.at(-1) ?? 0).toFixed(2)}`;
  console.log(
    `\n### Revocation propagation, instance A → B (${trials} trials; B's cache warm before each)\n`,
  );
  console.log("| measured from | p50 ms | p99 ms | max ms |");
  console.log("|---|---:|---:|---:|");
  console.log(`| revoke committed on A → first 401 from B | ${stat(afterCommit)} |`);
  console.log(
    `| revoke called on A (includes its transaction) → first 401 from B | ${stat(samples)} |`,
  );
} finally {
  await a.close();
  await b.close();
  cluster.remove();
}
