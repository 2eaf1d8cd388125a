// Preload for the conformance harness (NODE_OPTIONS="--require ./bind-localhost.cjs").
//
// The harness's mock servers call server.listen(0) with no host, which binds every interface;
// snodo's rule is that test servers bind 127.0.0.1 only. This preload sends every TCP listen
// with no host (or a wildcard host) to 127.0.0.1 and leaves everything else alone.
//
// It binds synchronously: the scenarios read server.address().port right after listen(), and
// listen(port, host) would first resolve the host asynchronously. Node's own port-only path
// ends in the internal Server#_listen2(address, port, addressType, backlog, fd, flags), so the
// preload calls that with the literal address.
'use strict';

const net = require('net');

const originalListen = net.Server.prototype.listen;
const WILDCARDS = new Set(['', '0.0.0.0', '::', '::0']);

function isWildcard(host) {
  return host === undefined || host === null || WILDCARDS.has(host);
}

function isPort(value) {
  return typeof value === 'number' || (typeof value === 'string' && /^\d+$/.test(value));
}

// The port, host and backlog of a TCP listen() call, or null for anything else
// (pipes, handles, file descriptors, options this preload does not rewrite).
function tcpListenArgs(args) {
  const first = args[0];
  if (first === undefined || first === null || typeof first === 'function') {
    return { port: 0, host: undefined, backlog: undefined };
  }
  if (isPort(first)) {
    const rest = args.slice(1);
    const host = typeof rest[0] === 'string' ? rest[0] : undefined;
    const backlog = rest.find((value) => typeof value === 'number');
    return { port: Number(first), host, backlog };
  }
  if (typeof first === 'object') {
    const plainTcp =
      first.path === undefined && first.handle === undefined && first._handle === undefined &&
      first.fd === undefined && (first.port === undefined || isPort(first.port));
    const special = first.signal || first.exclusive === false || first.ipv6Only || first.reusePort;
    if (plainTcp && !special) {
      return { port: Number(first.port ?? 0), host: first.host, backlog: first.backlog };
    }
  }
  return null;
}

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const call = tcpListenArgs(args);
  if (call === null || !isWildcard(call.host) || this._handle) {
    return originalListen.apply(this, args);
  }
  const callback = args.find((value) => typeof value === 'function');
  if (callback) this.once('listening', callback);
  this._listen2('127.0.0.1', call.port, 4, call.backlog || 511, undefined, 0);
  return this;
};
