// Why: supergateway listens on every interface and has no option to choose one, but a benchmark on a
// shared machine must not open ports to the network. Loaded with `node --require`, this makes every
// TCP listen() in the process bind 127.0.0.1 (same port); Unix sockets and inherited handles are untouched.
'use strict';

const net = require('node:net');

const LOOPBACK = '127.0.0.1';
const listen = net.Server.prototype.listen;

function isPort(value) {
    return typeof value === 'number' || (typeof value === 'string' && /^\d+$/.test(value));
}

net.Server.prototype.listen = function listenOnLoopback(...args) {
    const first = args[0];
    if (args.length === 0 || typeof first === 'function') {
        args.unshift(0, LOOPBACK);
    } else if (isPort(first)) {
        if (typeof args[1] === 'string') {
            args[1] = LOOPBACK;
        } else {
            args.splice(1, 0, LOOPBACK);
        }
    } else if (first !== null && typeof first === 'object' && first.path === undefined && first.fd === undefined && !first._handle) {
        args[0] = Object.assign({}, first, { host: LOOPBACK });
    }
    return listen.apply(this, args);
};
