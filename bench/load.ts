// A small closed-loop HTTP load generator for the benchmarks: `connections` keep-alive
// connections on loopback each send the next request as soon as the last one answered, for a
// fixed time. Runs in the benchmark's own process, so it shares the CPU with the server measured:
// compare the ratios of one run, not absolute numbers across machines.
import http from "node:http";

export type LoadResult = {
  requests: number;
  seconds: number;
  perSecond: number;
  statuses: Record<string, number>;
  p50Ms: number;
  p99Ms: number;
};

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export async function runLoad(options: {
  url: string;
  method?: string;
  headers?: (i: number) => Record<string, string>;
  body?: (i: number) => string | undefined;
  connections: number;
  durationMs: number;
}): Promise<LoadResult> {
  const target = new URL(options.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.connections });
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  let sent = 0;
  const deadline = performance.now() + options.durationMs;
  const started = performance.now();
  const one = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const body = options.body?.(i);
      const t0 = performance.now();
      const req = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname + target.search,
          method: options.method ?? "GET",
          agent,
          headers: {
            ...(options.headers?.(i) ?? {}),
            ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) }),
          },
        },
        (res) => {
          res.resume();
          res.on("end", () => {
            latencies.push(performance.now() - t0);
            const key = String(res.statusCode);
            statuses[key] = (statuses[key] ?? 0) + 1;
            resolve();
          });
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  const worker = async () => {
    while (performance.now() < deadline) await one(sent++);
  };
  await Promise.all(Array.from({ length: options.connections }, worker));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    statuses,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
}
