// The TypeScript SDK client for benchmarks/stdio.py; prints one JSON line.
//
//   node benchmarks/ts/bench.mjs rates  CALLS CONCURRENT_CALLS WARMUP CONCURRENCY COMMAND ARGS...
//   node --expose-gc benchmarks/ts/bench.mjs memory CONNECTIONS COMMAND ARGS...
//
// rates: connect (initialize; the 1.x client speaks 2025-11-25), check one call, WARMUP untimed
// calls, CALLS sequential calls, then CONCURRENCY async workers on the same client making
// CONCURRENT_CALLS calls in total. memory: after one warm-up client, open CONNECTIONS clients and
// make one call on each; report this process's RSS before and after (servers excluded).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const TEXT = "hi";

async function open(command, args) {
  const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
  let negotiated = null;
  transport.setProtocolVersion = (version) => {
    negotiated = version;
  };
  const client = new Client({ name: "bench-ts", version: "1.0.0" });
  await client.connect(transport);
  return { client, negotiated: () => negotiated };
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

async function rates(calls, concurrentCalls, warmup, concurrency, command, args) {
  const { client, negotiated } = await open(command, args);
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
    const share = Math.floor(concurrentCalls / concurrency);
    const worker = async () => {
      for (let i = 0; i < share; i++) check(await echo(client));
    };
    cpu = process.cpuUsage();
    started = performance.now();
    await Promise.all(Array.from({ length: concurrency }, worker));
    const conc = (performance.now() - started) / 1000;
    const concCpu = cpuSeconds(cpu);
    return {
      seq_seconds: seq,
      seq_cpu: seqCpu,
      conc_seconds: conc,
      conc_calls: share * concurrency,
      conc_cpu: concCpu,
      negotiated: negotiated(),
    };
  } finally {
    await client.close();
  }
}

function settle() {
  if (globalThis.gc) {
    globalThis.gc();
    globalThis.gc();
  }
  return process.memoryUsage().rss;
}

async function memory(connections, command, args) {
  const warm = await open(command, args);
  check(await echo(warm.client));
  const clients = [warm.client];
  try {
    const before = settle();
    for (let i = 0; i < connections; i++) {
      const { client } = await open(command, args);
      clients.push(client);
      check(await echo(client));
    }
    const after = settle();
    return { rss_before: before, rss_after: after, connections, negotiated: warm.negotiated() };
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

const [mode, ...rest] = process.argv.slice(2);
let outcome;
if (mode === "rates") {
  const [calls, concurrentCalls, warmup, concurrency, command, ...args] = rest;
  outcome = await rates(+calls, +concurrentCalls, +warmup, +concurrency, command, args);
} else if (mode === "memory") {
  const [connections, command, ...args] = rest;
  outcome = await memory(+connections, command, args);
} else {
  console.error("usage: bench.mjs rates|memory ...");
  process.exit(2);
}
console.log(JSON.stringify(outcome));
