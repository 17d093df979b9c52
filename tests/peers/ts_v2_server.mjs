// Why: a real TypeScript SDK v2 (@modelcontextprotocol/server 2.4.0) server, the dual-era reference from
// the TS side, so Manifold's tests meet its exact wire behaviour (modern per-request HTTP, stateless legacy
// fallback with GET/DELETE 405, stdio era pinning) instead of a mock of it. See tests/peers/README.md.
//
// usage: node ts_v2_server.mjs stdio
//        node ts_v2_server.mjs http --port N      (binds 127.0.0.1, serves /mcp)

import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import {
    McpServer,
    createMcpHandler,
    fromJsonSchema,
    hostHeaderValidationResponse,
    inputRequired,
    inputResponse,
    localhostAllowedHostnames,
    originValidationResponse,
    localhostAllowedOrigins
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const HOST = '127.0.0.1';

// One factory backs both eras: the SDK builds a fresh instance per HTTP request or per stdio connection.
function buildServer() {
    const server = new McpServer(
        { name: 'manifold-ts-v2-peer', version: '1.0.0' },
        { instructions: 'Test peer for Manifold.' }
    );
    server.registerTool(
        'echo',
        {
            description: 'Return the message unchanged.',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: { message: { type: 'string' } },
                required: ['message']
            })
        },
        async ({ message }) => ({ content: [{ type: 'text', text: message }] })
    );
    server.registerTool(
        'add',
        {
            description: 'Add two numbers.',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: { a: { type: 'number' }, b: { type: 'number' } },
                required: ['a', 'b']
            })
        },
        async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] })
    );
    registerQuestionTools(server);
    server.registerResource(
        'hello',
        'test://ts/hello',
        { mimeType: 'text/plain', description: 'A fixed text resource.' },
        async uri => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'Hello from the TS v2 peer' }] })
    );
    server.registerPrompt(
        'greeting',
        {
            description: 'A one-message prompt greeting `name`.',
            argsSchema: fromJsonSchema({
                type: 'object',
                properties: { name: { type: 'string' } },
                required: ['name']
            })
        },
        ({ name }) => ({
            messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${name} warmly.` } }]
        })
    );
    return server;
}

const NO_ARGUMENTS = fromJsonSchema({ type: 'object', properties: {} });
const TEXT_ARGUMENT = fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] });

// Each question two ways, as SDK 2.x servers are written: the multi-round-trip form (`inputRequired`),
// which the SDK also serves to legacy clients as real server->client requests, and the push form
// (`ctx.mcpReq.requestSampling`/`elicitInput`), which only the legacy era can carry.
function registerQuestionTools(server) {
    const asking = (name, description, inputSchema, ask, answer) =>
        server.registerTool(name, { description, inputSchema }, async (args, ctx) => {
            const got = inputResponse(ctx.mcpReq.inputResponses, 'q');
            if (got.kind === 'missing') return inputRequired({ inputRequests: { q: ask(args) } });
            return { content: [{ type: 'text', text: answer(got) }] };
        });
    asking(
        'summarize',
        "Ask the client's model to summarize `text` (sampling, multi-round-trip).",
        TEXT_ARGUMENT,
        ({ text }) =>
            inputRequired.createMessage({
                messages: [{ role: 'user', content: { type: 'text', text: `Summarize: ${text}` } }],
                maxTokens: 100
            }),
        got => (got.kind === 'sampling' && got.result.content.type === 'text' ? got.result.content.text : `unexpected ${got.kind}`)
    );
    asking(
        'ask_name',
        'Ask the client for a name (form elicitation, multi-round-trip).',
        NO_ARGUMENTS,
        () =>
            inputRequired.elicit({
                message: 'What is your name?',
                requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
            }),
        got => (got.kind === 'elicit' && got.action === 'accept' ? `Hello, ${got.content?.name}!` : `elicitation ${got.action ?? got.kind}`)
    );
    asking(
        'open_link',
        'Send the client to a URL (URL-mode elicitation, multi-round-trip).',
        NO_ARGUMENTS,
        () => inputRequired.elicitUrl({ message: 'Please sign in.', url: 'https://example.com/sign-in' }),
        got => `url elicitation ${got.action ?? got.kind}`
    );
    asking(
        'list_roots',
        "List the client's roots (multi-round-trip).",
        NO_ARGUMENTS,
        () => inputRequired.listRoots(),
        got => (got.kind === 'roots' ? got.roots.map(r => r.uri).join(' ') : `unexpected ${got.kind}`)
    );
    server.registerTool(
        'push_summarize',
        {
            description: "Ask the client's model to summarize `text` with a server->client request (legacy era only).",
            inputSchema: TEXT_ARGUMENT
        },
        async ({ text }, ctx) => {
            const sampled = await ctx.mcpReq.requestSampling({
                messages: [{ role: 'user', content: { type: 'text', text: `Summarize: ${text}` } }],
                maxTokens: 100
            });
            return { content: [{ type: 'text', text: sampled.content.type === 'text' ? sampled.content.text : 'non-text' }] };
        }
    );
}

// node:http speaks IncomingMessage/ServerResponse; the SDK handler speaks fetch Request/Response.
function toWebRequest(req, signal) {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
        if (Array.isArray(value)) value.forEach(v => headers.append(name, v));
        else if (value !== undefined) headers.set(name, value);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    return new Request(`http://${req.headers.host ?? `${HOST}`}${req.url}`, {
        method: req.method,
        headers,
        body: hasBody ? Readable.toWeb(req) : undefined,
        duplex: hasBody ? 'half' : undefined,
        signal
    });
}

async function writeWebResponse(response, res) {
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.flushHeaders();
    if (!response.body) return res.end();
    for await (const chunk of response.body) {
        if (res.destroyed) break;
        res.write(chunk);
    }
    res.end();
}

function serveHttp(port) {
    const handler = createMcpHandler(() => buildServer(), { onerror: err => console.error('mcp handler:', err) });
    const allowedHosts = localhostAllowedHostnames();
    const allowedOrigins = localhostAllowedOrigins();
    const http = createServer(async (req, res) => {
        // A closed connection aborts the request: in the modern era that is how a client cancels.
        const abort = new AbortController();
        res.on('close', () => abort.abort());
        try {
            if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
                res.writeHead(404).end();
                return;
            }
            const request = toWebRequest(req, abort.signal);
            const rejected =
                hostHeaderValidationResponse(request, allowedHosts) ?? originValidationResponse(request, allowedOrigins);
            await writeWebResponse(rejected ?? (await handler.fetch(request)), res);
        } catch (err) {
            console.error('request failed:', err);
            if (!res.headersSent) res.writeHead(500);
            res.end();
        }
    });
    http.listen(port, HOST, () => console.error(`ts_v2_server listening on http://${HOST}:${http.address().port}/mcp`));
    const stop = () => http.close(() => handler.close().finally(() => process.exit(0)));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
}

function main(argv) {
    const [mode, ...rest] = argv;
    if (mode === 'stdio') {
        serveStdio(() => buildServer(), { onerror: err => console.error('stdio:', err) });
        return;
    }
    const portFlag = rest.indexOf('--port');
    const port = portFlag >= 0 ? Number(rest[portFlag + 1]) : NaN;
    if (mode === 'http' && Number.isInteger(port) && port >= 0 && port <= 65535) {
        serveHttp(port);
        return;
    }
    console.error('usage: node ts_v2_server.mjs stdio | http --port N');
    process.exit(2);
}

main(process.argv.slice(2));
