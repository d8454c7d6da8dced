// What a span costs (src/trace.ts): a function called straight, through `inSpan` with traces off
// (no endpoint: the default), and through `inSpan` with the SDK recording (spans batched to an
// exporter that drops them, so only peergate's and the SDK's own work is measured). Each figure is
// the median of five rounds of N calls, interleaved, in one process; the table gives nanoseconds
// per call and the ratio to the straight call measured in the same run.
//
//   node bench/trace.ts [--calls N]
import { parseArgs } from "node:util";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BatchSpanProcessor, type SpanExporter, TracerProvider } from "@opentelemetry/sdk-trace";
import { inSpan, setTracing } from "../src/trace.ts";

const { values } = parseArgs({ options: { calls: { type: "string", default: "200000" } } });
const calls = Number(values.calls);

let sink = 0;
const work = async (n: number) => {
  sink += n;
  return n;
};

async function straight(): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < calls; i++) await work(i);
  return performance.now() - started;
}

async function spanned(): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < calls; i++) await inSpan("bench", { "peergate.i": i }, () => work(i));
  return performance.now() - started;
}

const dropping: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => {},
};

const rounds = { straight: [] as number[], off: [] as number[], on: [] as number[] };
const provider = new TracerProvider({
  spanProcessors: [new BatchSpanProcessor({ exporter: dropping, maxQueueSize: 65_536 })],
});
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
for (let round = 0; round < 5; round++) {
  setTracing(false);
  rounds.straight.push(await straight());
  rounds.off.push(await spanned());
  setTracing(true);
  rounds.on.push(await spanned());
}
setTracing(false);
await provider.shutdown();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const base = median(rounds.straight);
const row = (name: string, ms: number) =>
  `| ${name} | ${((ms * 1e6) / calls).toFixed(0)} | ${(ms / base).toFixed(2)} |`;
console.log(`\nA span's cost, ${calls} calls per round, median of 5 (node bench/trace.ts)\n`);
console.log("| call | ns per call | × straight |");
console.log("|---|---|---|");
console.log(row("straight (an awaited async function)", base));
console.log(row("inSpan, traces off (no endpoint)", median(rounds.off)));
console.log(row("inSpan, traces on (SDK recording, batched)", median(rounds.on)));
if (sink < 0) console.log(sink);
