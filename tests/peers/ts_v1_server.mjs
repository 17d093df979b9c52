// Why: a real TypeScript SDK 1.x (@modelcontextprotocol/sdk 1.32.2) server whose tools ask the client
// questions in the middle of a call (sampling, form and URL elicitation, roots), the way most servers
// in use today are written, so Manifold's tests can check that such a question reaches the client
// through the gateway exactly as it would directly. See tests/peers/README.md.
//
// usage: node ts_v1_server.mjs stdio
//        node ts_v1_server.mjs http [--port N]   (binds 127.0.0.1, serves /mcp; port 0 or none picks one
//                                                 and the URL is printed on stderr)

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const HOST = '127.0.0.1';

// Every question is tied to the call that asks it (relatedRequestId) and withdrawn with it (signal), so
// over HTTP it travels on the call's own response stream and a cancelled call cancels its question.
function askOptions(extra) {
    return { relatedRequestId: extra.requestId, signal: extra.signal };
}

function text(value) {
    return { content: [{ type: 'text', text: value }] };
}

function buildServer() {
    const mcp = new McpServer({ name: 'manifold-ts-v1-peer', version: '1.0.0' }, { instructions: 'Test peer for Manifold.' });
    const server = mcp.server;
    mcp.registerTool('echo', { description: 'Return the message unchanged.', inputSchema: { message: z.string() } }, async ({ message }) =>
        text(message)
    );
    mcp.registerTool(
        'summarize',
        { description: "Ask the client's model to summarize `text` (sampling).", inputSchema: { text: z.string() } },
        async ({ text: input }, extra) => {
            const sampled = await server.createMessage(
                { messages: [{ role: 'user', content: { type: 'text', text: `Summarize: ${input}` } }], maxTokens: 100 },
                askOptions(extra)
            );
            return text(sampled.content.type === 'text' ? sampled.content.text : `non-text sampling result: ${sampled.content.type}`);
        }
    );
    mcp.registerTool('ask_name', { description: 'Ask the client for a name (form elicitation).' }, async extra => {
        const answer = await server.elicitInput(
            {
                mode: 'form',
                message: 'What is your name?',
                requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
            },
            askOptions(extra)
        );
        return text(answer.action === 'accept' ? `Hello, ${answer.content?.name}!` : `elicitation ${answer.action}`);
    });
    mcp.registerTool('open_link', { description: 'Send the client to a URL (URL-mode elicitation).' }, async extra => {
        const answer = await server.elicitInput(
            { mode: 'url', message: 'Please sign in.', url: 'https://example.com/sign-in', elicitationId: randomUUID() },
            askOptions(extra)
        );
        return text(`url elicitation ${answer.action}`);
    });
    mcp.registerTool('list_roots', { description: "List the client's roots." }, async extra => {
        const { roots } = await server.listRoots({}, askOptions(extra));
        return text(roots.map(r => r.uri).join(' '));
    });
    return mcp;
}

async function serveStdio() {
    await buildServer().connect(new StdioServerTransport());
}

// Stateful Streamable HTTP: one transport and one server per session, as the SDK's examples do.
function serveHttp(port) {
    const sessions = new Map();
    const http = createServer(async (req, res) => {
        try {
            if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
                res.writeHead(404).end();
                return;
            }
            const body = req.method === 'POST' ? await readJson(req) : undefined;
            const id = req.headers['mcp-session-id'];
            let transport = typeof id === 'string' ? sessions.get(id) : undefined;
            if (!transport && req.method === 'POST' && isInitializeRequest(body)) {
                transport = new StreamableHTTPServerTransport({
                    sessionIdGenerator: () => randomUUID(),
                    onsessioninitialized: sid => sessions.set(sid, transport)
                });
                transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
                await buildServer().connect(transport);
            }
            if (!transport) {
                res.writeHead(400, { 'Content-Type': 'application/json' });
                res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: no valid session' }, id: null }));
                return;
            }
            await transport.handleRequest(req, res, body);
        } catch (err) {
            console.error('request failed:', err);
            if (!res.headersSent) res.writeHead(500);
            res.end();
        }
    });
    http.listen(port, HOST, () => console.error(`ts_v1_server listening on http://${HOST}:${http.address().port}/mcp`));
    const stop = () => http.close(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
}

async function readJson(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const raw = Buffer.concat(chunks).toString('utf8');
    try {
        return JSON.parse(raw);
    } catch {
        return undefined;
    }
}

function main(argv) {
    const [mode, ...rest] = argv;
    if (mode === 'stdio') {
        serveStdio();
        return;
    }
    const portFlag = rest.indexOf('--port');
    const port = portFlag >= 0 ? Number(rest[portFlag + 1]) : 0;
    if (mode === 'http' && Number.isInteger(port) && port >= 0 && port <= 65535) {
        serveHttp(port);
        return;
    }
    console.error('usage: node ts_v1_server.mjs stdio | http [--port N]');
    process.exit(2);
}

main(process.argv.slice(2));
