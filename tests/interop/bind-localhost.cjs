// Preload for the Node servers of snodo's interop tests (node --require THIS_FILE ...).
//
// Servers here listen on 127.0.0.1 only, but a Node server usually calls listen(port) with no
// host, which binds every interface. This rewrites such a call (no host, or a wildcard host) to
// listen({port, host: "127.0.0.1"}); calls on a named host, a pipe, a handle or an fd pass
// through untouched. Binding with a host goes through an (immediate) address lookup, so
// server.address() is null until 'listening'; the servers used here only read it after.
//
// With SNODO_LISTEN_FILE set, every server appends one JSON line {"address", "family", "port"}
// to that file once it listens, so a test can learn the port the OS chose for listen(0).
"use strict";
const fs = require("node:fs");
const net = require("node:net");

const WILDCARDS = new Set([undefined, null, "", "0.0.0.0", "::", "::0", "0:0:0:0:0:0:0:0"]);
const LOOPBACK = "127.0.0.1";
const original = net.Server.prototype.listen;

function isPort(value) {
  return typeof value === "number" || (typeof value === "string" && /^\d+$/.test(value));
}

// listen(port?, host?, backlog?, callback?) or listen(options, callback?) -> [options, callback]
// for a TCP listen whose host we should rewrite, or null to leave the call alone.
function tcpOptions(args) {
  const callback = typeof args[args.length - 1] === "function" ? args[args.length - 1] : undefined;
  const rest = callback ? args.slice(0, -1) : args.slice();
  const first = rest[0];
  if (first === undefined || first === null) {
    return [{ port: 0, host: rest[1] }, callback];
  }
  if (isPort(first)) {
    const options = { port: Number(first) };
    if (typeof rest[1] === "string") options.host = rest[1];
    const backlog = rest.slice(1).find((x) => typeof x === "number");
    if (backlog !== undefined) options.backlog = backlog;
    return [options, callback];
  }
  if (typeof first === "object" && first.path === undefined && first.handle === undefined &&
      first._handle === undefined && first.fd === undefined) {
    return [{ ...first, port: first.port === undefined ? 0 : first.port }, callback];
  }
  return null; // a pipe path, a handle or an fd
}

function announce(server) {
  const file = process.env.SNODO_LISTEN_FILE;
  const where = server.address();
  if (!file || where === null || typeof where !== "object") return;
  fs.appendFileSync(file, JSON.stringify(where) + "\n");
}

net.Server.prototype.listen = function listen(...args) {
  const parsed = tcpOptions(args);
  if (parsed === null) return original.apply(this, args);
  const [options, callback] = parsed;
  if (WILDCARDS.has(options.host)) options.host = LOOPBACK;
  delete options.ipv6Only; // meaningless on an IPv4 host
  this.once("listening", () => announce(this));
  return callback ? original.call(this, options, callback) : original.call(this, options);
};
