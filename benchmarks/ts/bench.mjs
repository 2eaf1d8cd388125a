// The TypeScript SDK 1.x client for benchmarks/stdio.py and benchmarks/streamable_http.py; prints
// one JSON line.
//
//   node benchmarks/ts/bench.mjs rates CALLS CONCURRENT_CALLS WARMUP CONCURRENCY stdio COMMAND ARGS...
//   node benchmarks/ts/bench.mjs rates CALLS CONCURRENT_CALLS WARMUP CONCURRENCY http URL
//   node --expose-gc benchmarks/ts/bench.mjs memory CONNECTIONS COMMAND ARGS...
//
// rates: connect (initialize; the 1.x client speaks 2025-11-25; over HTTP its Streamable HTTP
// transport with its defaults; the session ends with DELETE), check one call, WARMUP untimed
// calls, CALLS sequential calls, then CONCURRENCY async workers on the same client making
// CONCURRENT_CALLS calls in total. memory: after one warm-up client, open CONNECTIONS clients and
// make one call on each; report this process's RSS before and after (servers excluded).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const TEXT = "hi";

async function open(kind, target) {
  const transport =
    kind === "http"
      ? new StreamableHTTPClientTransport(new URL(target[0]))
      : new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: "inherit" });
  let negotiated = null;
  const setProtocolVersion = transport.setProtocolVersion?.bind(transport); // HTTP sends it as a header
  transport.setProtocolVersion = (version) => {
    negotiated = version;
    setProtocolVersion?.(version);
  };
  const client = new Client({ name: "bench-ts", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport, negotiated: () => negotiated };
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

async function rates(calls, concurrentCalls, warmup, concurrency, kind, target) {
  const { client, transport, negotiated } = await open(kind, target);
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
    if (kind === "http") await transport.terminateSession();
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
  const warm = await open("stdio", [command, ...args]);
  check(await echo(warm.client));
  const clients = [warm.client];
  try {
    const before = settle();
    for (let i = 0; i < connections; i++) {
      const { client } = await open("stdio", [command, ...args]);
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
  const [calls, concurrentCalls, warmup, concurrency, kind, ...target] = rest;
  if (kind !== "stdio" && kind !== "http") {
    console.error("usage: bench.mjs rates CALLS CONCURRENT_CALLS WARMUP CONCURRENCY stdio|http ...");
    process.exit(2);
  }
  outcome = await rates(+calls, +concurrentCalls, +warmup, +concurrency, kind, target);
} else if (mode === "memory") {
  const [connections, command, ...args] = rest;
  outcome = await memory(+connections, command, args);
} else {
  console.error("usage: bench.mjs rates|memory ...");
  process.exit(2);
}
console.log(JSON.stringify(outcome));
