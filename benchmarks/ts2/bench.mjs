// The TypeScript SDK v2 client (@modelcontextprotocol/client) for benchmarks/aio.py; prints one
// JSON line.
//
//   node benchmarks/ts2/bench.mjs VERSION CALLS CONCURRENT_CALLS WARMUP CONCURRENCIES stdio COMMAND ARGS...
//   node benchmarks/ts2/bench.mjs VERSION CALLS CONCURRENT_CALLS WARMUP CONCURRENCIES http URL
//
// VERSION 2025-11-25: the plain initialize handshake (versionNegotiation 'legacy', the default);
// 2026-07-28: pinned (versionNegotiation { pin }: one server/discover at connect, no fallback).
// Connect, check one call, WARMUP untimed calls, CALLS sequential calls, then for each N in
// CONCURRENCIES (comma-separated) N concurrent promises on the same client making
// CONCURRENT_CALLS calls in total.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const TEXT = "hi";
const STATELESS = "2026-07-28";

async function open(version, kind, target) {
  const transport =
    kind === "stdio"
      ? new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: "inherit" })
      : new StreamableHTTPClientTransport(new URL(target[0]));
  const options = version === STATELESS ? { versionNegotiation: { mode: { pin: STATELESS } } } : {};
  const client = new Client({ name: "bench-ts2", version: "1.0.0" }, options);
  await client.connect(transport);
  return client;
}

async function echo(client) {
  return client.callTool({ name: "echo", arguments: { text: TEXT } });
}

function check(result) {
  if (result.content?.[0]?.text !== TEXT) throw new Error(`bad answer: ${JSON.stringify(result)}`);
}

function cpuSeconds(since) {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
}

async function rates(version, calls, concurrentCalls, warmup, concurrencies, kind, target) {
  const client = await open(version, kind, target);
  try {
    check(await echo(client));
    for (let i = 0; i < warmup; i++) await echo(client);
    let cpu = process.cpuUsage();
    let started = performance.now();
    let last;
    for (let i = 0; i < calls; i++) last = await echo(client);
    const seq = (performance.now() - started) / 1000;
    const seqCpu = cpuSeconds(cpu);
    check(last);
    const conc = {};
    for (const concurrency of concurrencies) {
      const share = Math.floor(concurrentCalls / concurrency);
      const worker = async () => {
        for (let i = 0; i < share; i++) check(await echo(client));
      };
      cpu = process.cpuUsage();
      started = performance.now();
      await Promise.all(Array.from({ length: concurrency }, worker));
      conc[concurrency] = {
        seconds: (performance.now() - started) / 1000,
        calls: share * concurrency,
        cpu: cpuSeconds(cpu),
      };
    }
    return {
      seq_seconds: seq,
      seq_cpu: seqCpu,
      conc,
      negotiated: client.getNegotiatedProtocolVersion() ?? null,
    };
  } finally {
    await client.close();
  }
}

const [version, calls, concurrentCalls, warmup, concurrencies, kind, ...target] = process.argv.slice(2);
if (kind !== "stdio" && kind !== "http") {
  console.error("usage: bench.mjs VERSION CALLS CONCURRENT_CALLS WARMUP CONCURRENCIES stdio|http ...");
  process.exit(2);
}
const levels = concurrencies.split(",").map(Number);
const outcome = await rates(version, +calls, +concurrentCalls, +warmup, levels, kind, target);
console.log(JSON.stringify(outcome));
