// Why: some npm peers (server-everything, supergateway) listen on all interfaces and offer no host option,
// but servers in Manifold's tests must bind 127.0.0.1 only. Preloaded with `node --require <this file>`,
// it rewrites every TCP listen() in the process to 127.0.0.1, keeping the port the peer asked for.
'use strict';

const net = require('node:net');

const LOOPBACK = '127.0.0.1';
const originalListen = net.Server.prototype.listen;

net.Server.prototype.listen = function listenOnLoopback(...args) {
    const [first] = args;
    if (args.length === 0 || typeof first === 'function') {
        // listen() / listen(cb): an ephemeral port on every interface becomes one on loopback.
        args.unshift(0, LOOPBACK);
    } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
        // listen(port[, host][, backlog][, cb])
        if (typeof args[1] === 'string') args[1] = LOOPBACK;
        else args.splice(1, 0, LOOPBACK);
    } else if (first && typeof first === 'object' && first.path === undefined && first.fd === undefined && !first._handle) {
        // listen({ port, host, ... }[, cb])
        args[0] = { ...first, host: LOOPBACK };
    }
    // Unix socket paths and inherited handles are not TCP and pass through untouched.
    return originalListen.apply(this, args);
};
