// Why: the conformance comparison (run-compare.sh) needs a server built on the TypeScript SDK 1.x
// (@modelcontextprotocol/sdk 1.32.2, the legacy-era SDK most deployed servers use) that offers the
// official suite's fixture tools, resources and prompts under their exact names, so the suite can be
// run against it directly and through `manifold serve` and any scenario that gets worse is Manifold's.
// Names and behaviour follow the suite's scenario descriptions, like crates/conformance-fixture, but
// in the legacy era only (that is all SDK 1.x speaks): sampling, elicitation and roots travel as
// server->client requests on the tool call's own response stream.
//
// usage: node tests/conformance/ts_v1_fixture.mjs [--port N]
//   binds 127.0.0.1 (port 0 = any free one) and prints `listening on http://127.0.0.1:PORT/mcp` as its
//   first stdout line. The SDK is resolved from $MANIFOLD_PEERS_DIR (default tests/peers).

import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PEERS = process.env.MANIFOLD_PEERS_DIR || path.join(HERE, '..', 'peers');
const requireFromPeers = createRequire(path.join(PEERS, 'package.json'));
const sdk = name => requireFromPeers(`@modelcontextprotocol/sdk/${name}`);

const { Server } = sdk('server/index.js');
const { StreamableHTTPServerTransport } = sdk('server/streamableHttp.js');
const { createMcpExpressApp } = sdk('server/express.js');
const { InMemoryEventStore } = sdk('examples/shared/inMemoryEventStore.js');
const types = sdk('types.js');

const HOST = '127.0.0.1';
// How long a client waits before resuming a stream the server closed (the SSE `retry:` field).
const RETRY_INTERVAL_MS = 500;
// Sessions kept at once; a new session beyond this is refused with 503 rather than growing forever.
const MAX_SESSIONS = 256;
// The pause between the steps of the logging and progress tools (the suite asks for about 50 ms).
const STEP_MS = 50;

const RED_PIXEL_PNG =
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FDAAAAAElFTkSuQmCC';
const SILENCE_WAV = 'UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==';

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const text = t => ({ content: [{ type: 'text', text: t }] });
const noArguments = { type: 'object', properties: {} };
const textSchema = field => ({ type: 'object', properties: { [field]: { type: 'string' } }, required: [field] });
const stringArgument = (name, description) => ({
    type: 'object',
    properties: { [name]: { type: 'string', description } },
    required: [name]
});

// Process-wide state, as in crates/conformance-fixture: the toggles the trigger tools flip.
const state = { dynamicTool: false, dynamicPrompt: false, watchedVersion: 0 };
const sessions = new Map();

// ---- what the tools ask of the client -------------------------------------------------------------

function elicit(extra, message, requestedSchema) {
    return extra.sendRequest(
        { method: 'elicitation/create', params: { message, requestedSchema } },
        types.ElicitResultSchema
    );
}

function sample(extra, prompt, maxTokens) {
    return extra.sendRequest(
        {
            method: 'sampling/createMessage',
            params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens }
        },
        types.CreateMessageResultSchema
    );
}

function listRoots(extra) {
    return extra.sendRequest({ method: 'roots/list' }, types.ListRootsResultSchema);
}

const describeElicitation = a => `action=${a.action}, content=${JSON.stringify(a.content ?? {})}`;
const acceptedField = (a, field, fallback) =>
    a.action === 'accept' && a.content && a.content[field] !== undefined ? String(a.content[field]) : fallback;
const sampledText = r => (r.content && r.content.type === 'text' ? r.content.text : '(no text)');
const rootUris = r => (r.roots && r.roots.length ? r.roots.map(root => root.uri).join(', ') : '(none)');

function log(extra, data) {
    return extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
}

async function progress(extra, done) {
    const progressToken = extra._meta?.progressToken;
    if (progressToken === undefined) return;
    await extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken, progress: done, total: 100 }
    });
}

// ---- tools ---------------------------------------------------------------------------------------

const ELICITATION_DEFAULTS_SCHEMA = {
    type: 'object',
    properties: {
        name: { type: 'string', default: 'John Doe' },
        age: { type: 'integer', default: 30 },
        score: { type: 'number', default: 95.5 },
        status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', default: true }
    }
};

const ELICITATION_ENUMS_SCHEMA = {
    type: 'object',
    properties: {
        untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
            type: 'string',
            oneOf: [
                { const: 'value1', title: 'First Option' },
                { const: 'value2', title: 'Second Option' },
                { const: 'value3', title: 'Third Option' }
            ]
        },
        legacyEnum: {
            type: 'string',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three']
        },
        untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
        titledMulti: {
            type: 'array',
            items: {
                anyOf: [
                    { const: 'value1', title: 'First Choice' },
                    { const: 'value2', title: 'Second Choice' },
                    { const: 'value3', title: 'Third Choice' }
                ]
            }
        }
    }
};

const JSON_SCHEMA_2020_12 = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: {
        address: {
            $anchor: 'addressDef',
            type: 'object',
            properties: { street: { type: 'string' }, city: { type: 'string' } }
        }
    },
    properties: {
        name: { type: 'string' },
        address: { $ref: '#/$defs/address' },
        contactMethod: { type: 'string', enum: ['phone', 'email'] },
        phone: { type: 'string' },
        email: { type: 'string' }
    },
    allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
    if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
    then: { required: ['phone'] },
    else: { required: ['email'] },
    additionalProperties: false
};

const CONFIRM_SCHEMA = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };

// [name, description, inputSchema, run(args, extra, server)] in listing order; test_simple_text needs
// no arguments and comes first, as in crates/conformance-fixture.
const TOOLS = [
    ['test_simple_text', 'Returns a simple text content block.', noArguments,
        async () => text('This is a simple text response for testing.')],
    ['test_image_content', 'Returns an image content block (a 1x1 red PNG).', noArguments,
        async () => ({ content: [{ type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' }] })],
    ['test_audio_content', 'Returns an audio content block (a short WAV).', noArguments,
        async () => ({ content: [{ type: 'audio', data: SILENCE_WAV, mimeType: 'audio/wav' }] })],
    ['test_embedded_resource', 'Returns an embedded text resource.', noArguments,
        async () => ({
            content: [{
                type: 'resource',
                resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' }
            }]
        })],
    ['test_multiple_content_types', 'Returns text, image and embedded resource content together.', noArguments,
        async () => ({
            content: [
                { type: 'text', text: 'Multiple content types test:' },
                { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' },
                {
                    type: 'resource',
                    resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' }
                }
            ]
        })],
    ['test_tool_with_logging', 'Sends three info log messages while it runs.', noArguments, runWithLogging],
    ['test_logging_tool', 'Like test_tool_with_logging.', noArguments, runWithLogging],
    ['test_error_handling', 'Always fails with a tool execution error (isError: true).', noArguments,
        async () => ({ ...text('This tool intentionally returns an error for testing'), isError: true })],
    ['test_tool_with_progress', 'Reports progress 0, 50 and 100 of 100 when the request carries a progress token.', noArguments,
        async (_args, extra) => {
            await progress(extra, 0);
            await sleep(STEP_MS);
            await progress(extra, 50);
            await sleep(STEP_MS);
            await progress(extra, 100);
            return text('Tool with progress executed successfully');
        }],
    ['test_sampling', 'Asks the client\'s LLM to answer the prompt (sampling/createMessage).',
        stringArgument('prompt', 'The prompt to send to the LLM'),
        async (args, extra) => text(`LLM response: ${sampledText(await sample(extra, requireString(args, 'prompt'), 100))}`)],
    ['test_elicitation', 'Asks the user for a username and an email (elicitation/create).',
        stringArgument('message', 'The message to show the user'),
        async (args, extra) => {
            const schema = {
                type: 'object',
                properties: {
                    username: { type: 'string', description: 'User\'s response' },
                    email: { type: 'string', description: 'User\'s email address' }
                },
                required: ['username', 'email']
            };
            return text(`User response: ${describeElicitation(await elicit(extra, requireString(args, 'message'), schema))}`);
        }],
    ['test_elicitation_sep1034_defaults', 'Elicits a form whose fields carry defaults (SEP-1034).', noArguments,
        async (_args, extra) => {
            const answer = await elicit(extra, 'Please review and update the form fields with defaults', ELICITATION_DEFAULTS_SCHEMA);
            return text(`Elicitation completed: ${describeElicitation(answer)}`);
        }],
    ['test_elicitation_sep1330_enums', 'Elicits a form using all five enum schema variants (SEP-1330).', noArguments,
        async (_args, extra) => {
            const answer = await elicit(extra, 'Please pick from each list', ELICITATION_ENUMS_SCHEMA);
            return text(`Elicitation completed: ${describeElicitation(answer)}`);
        }],
    ['json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features', JSON_SCHEMA_2020_12,
        async args => text(`json_schema_2020_12_tool received name=${args.name ?? '(no name)'}`)],
    ['test_reconnection', 'Closes its SSE stream after the priming event; the result follows on the resumed stream.', noArguments,
        async (_args, extra) => {
            await sleep(STEP_MS);
            extra.closeSSEStream?.();
            await sleep(4 * STEP_MS);
            return text('Reconnection test completed: the result arrived after the stream was closed');
        }],
    ['test_missing_capability', 'Needs the client\'s sampling capability.', noArguments,
        async (_args, extra) => text(`The client declared sampling and answered: ${sampledText(await sample(extra, 'Say anything.', 10))}`)],
    ['test_streaming_elicitation', 'Asks the user for a name.', noArguments, greetElicited],
    ['test_trigger_tool_change', 'Adds or removes test_dynamic_tool and announces notifications/tools/list_changed.', noArguments,
        async (_args, _extra, server) => {
            state.dynamicTool = !state.dynamicTool;
            await server.sendToolListChanged();
            return text(`test_dynamic_tool is now ${state.dynamicTool ? 'listed' : 'removed'}; notifications/tools/list_changed was announced`);
        }],
    ['test_trigger_prompt_change', 'Adds or removes test_dynamic_prompt and announces notifications/prompts/list_changed.', noArguments,
        async (_args, _extra, server) => {
            state.dynamicPrompt = !state.dynamicPrompt;
            await server.sendPromptListChanged();
            return text(`test_dynamic_prompt is now ${state.dynamicPrompt ? 'listed' : 'removed'}; notifications/prompts/list_changed was announced`);
        }],
    ['test_trigger_resource_update', 'Changes a resource and announces notifications/resources/updated to its subscribers.',
        { type: 'object', properties: { uri: { type: 'string', description: 'The resource that changed (default test://watched-resource)' } } },
        async args => {
            const uri = typeof args.uri === 'string' ? args.uri : WATCHED;
            if (uri === WATCHED) state.watchedVersion += 1;
            for (const session of sessions.values()) {
                if (session.subscriptions.has(uri)) await session.server.sendResourceUpdated({ uri });
            }
            return text(`notifications/resources/updated was announced for ${uri}`);
        }],
    ['test_custom_header', 'Echoes its region argument (SEP-2243 mirrors it into the Mcp-Param-Region header).',
        {
            type: 'object',
            properties: { region: { type: 'string', description: 'A region name; mirrored into the Mcp-Param-Region header over HTTP', 'x-mcp-header': 'Region' } },
            required: ['region']
        },
        async args => text(`Region: ${requireString(args, 'region')}`)],
    ['test_input_required_result_elicitation', 'Asks for the user\'s name and greets them.', noArguments, greetElicited],
    ['test_input_required_result_sampling', 'Asks the client\'s LLM for the capital of France.', noArguments,
        async (_args, extra) => text(`The model answered: ${sampledText(await sample(extra, 'What is the capital of France?', 100))}`)],
    ['test_input_required_result_list_roots', 'Asks for the client\'s roots (roots/list) and lists them.', noArguments,
        async (_args, extra) => text(`The client's roots: ${rootUris(await listRoots(extra))}`)],
    ['test_input_required_result_request_state', 'Asks for a confirmation.', noArguments,
        async (_args, extra) => {
            const answer = await elicit(extra, 'Please confirm', CONFIRM_SCHEMA);
            return text(`state-ok: the answer came back within this call (${describeElicitation(answer)})`);
        }],
    ['test_input_required_result_multiple_inputs', 'Asks for an elicitation, a sampling and the roots at once.', noArguments,
        async (_args, extra) => {
            const [who, greeting, roots] = await Promise.all([
                elicit(extra, 'What is your name?', textSchema('name')),
                sample(extra, 'Generate a greeting', 50),
                listRoots(extra)
            ]);
            return text(`name=${acceptedField(who, 'name', 'stranger')}; greeting=${sampledText(greeting)}; roots=${rootUris(roots)}`);
        }],
    ['test_input_required_result_multi_round', 'Asks for a name, then a favourite colour, then answers.', noArguments,
        async (_args, extra) => {
            const who = acceptedField(await elicit(extra, 'Step 1: What is your name?', textSchema('name')), 'name', 'stranger');
            const color = acceptedField(await elicit(extra, 'Step 2: What is your favorite color?', textSchema('color')), 'color', 'no colour');
            return text(`${who} likes ${color}`);
        }],
    ['test_input_required_result_tampered_state', 'Asks for a confirmation.', noArguments,
        async (_args, extra) => {
            const answer = await elicit(extra, 'Please confirm (state is sealed)', CONFIRM_SCHEMA);
            return text(`Confirmed with an intact requestState: ${describeElicitation(answer)}`);
        }],
    ['test_input_required_result_capabilities', 'Asks only for inputs the client declared capabilities for.', noArguments,
        async (_args, extra, server) => {
            const declared = server.getClientCapabilities() ?? {};
            const asked = [];
            if (declared.elicitation) asked.push(['user_name', elicit(extra, 'What is your name?', textSchema('name'))]);
            if (declared.sampling) asked.push(['greeting', sample(extra, 'Generate a greeting', 50)]);
            if (declared.roots) asked.push(['client_roots', listRoots(extra)]);
            if (asked.length === 0) return text('The client declared none of elicitation, sampling and roots, so nothing was asked');
            await Promise.all(asked.map(([, answer]) => answer));
            return text(`Answered inputs: ${asked.map(([key]) => key).sort().join(', ')}`);
        }],
    ['greet', 'Returns Hello, {name}! at once.', stringArgument('name', 'Who to greet'),
        async args => text(`Hello, ${requireString(args, 'name')}!`)]
];

const DYNAMIC_TOOL = ['test_dynamic_tool', 'Listed only while test_trigger_tool_change has switched it on.', noArguments,
    async () => text('test_dynamic_tool answered; test_trigger_tool_change removes it again')];

async function runWithLogging(_args, extra) {
    await log(extra, 'Tool execution started');
    await sleep(STEP_MS);
    await log(extra, 'Tool processing data');
    await sleep(STEP_MS);
    await log(extra, 'Tool execution completed');
    return text('Tool with logging executed successfully');
}

async function greetElicited(_args, extra) {
    const answer = await elicit(extra, 'What is your name?', textSchema('name'));
    return text(`Hello, ${acceptedField(answer, 'name', 'stranger')}!`);
}

function requireString(args, name) {
    if (typeof args[name] !== 'string') {
        throw new types.McpError(types.ErrorCode.InvalidParams, `this tool needs the string argument "${name}"`);
    }
    return args[name];
}

const listedTools = () => (state.dynamicTool ? [...TOOLS, DYNAMIC_TOOL] : TOOLS);

// ---- resources -----------------------------------------------------------------------------------

const STATIC_TEXT = 'test://static-text';
const STATIC_BINARY = 'test://static-binary';
const WATCHED = 'test://watched-resource';
const TEMPLATE = 'test://template/{id}/data';
const TEMPLATE_URI = /^test:\/\/template\/([^/]+)\/data$/;

const RESOURCES = [
    { uri: STATIC_TEXT, name: 'static-text', title: 'Static text', description: 'A text resource whose content never changes.', mimeType: 'text/plain' },
    { uri: STATIC_BINARY, name: 'static-binary', title: 'Static binary', description: 'A binary resource (a 1x1 red PNG).', mimeType: 'image/png' },
    { uri: WATCHED, name: 'watched-resource', title: 'Watched resource', description: 'Changes whenever test_trigger_resource_update runs.', mimeType: 'text/plain' }
];

function readResource(uri) {
    if (uri === STATIC_TEXT) return { uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' };
    if (uri === STATIC_BINARY) return { uri, mimeType: 'image/png', blob: RED_PIXEL_PNG };
    if (uri === WATCHED) return { uri, mimeType: 'text/plain', text: `Watched resource, version ${state.watchedVersion}.` };
    const match = TEMPLATE_URI.exec(uri);
    if (match) {
        const id = match[1];
        return { uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) };
    }
    throw new types.McpError(types.ErrorCode.InvalidParams, 'Resource not found', { uri });
}

// ---- prompts and completions ---------------------------------------------------------------------

const userText = t => ({ role: 'user', content: { type: 'text', text: t } });
const PROMPTS = [
    ['test_simple_prompt', 'A prompt without arguments.', [], () => [userText('This is a simple prompt for testing.')]],
    ['test_prompt_with_arguments', 'A prompt that substitutes two arguments.',
        [['arg1', 'First test argument'], ['arg2', 'Second test argument']],
        a => [userText(`Prompt with arguments: arg1='${a.arg1}', arg2='${a.arg2}'`)]],
    ['test_prompt_with_embedded_resource', 'A prompt that embeds a resource.', [['resourceUri', 'URI of the resource to embed']],
        a => [
            { role: 'user', content: { type: 'resource', resource: { uri: a.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
            userText('Please process the embedded resource above.')
        ]],
    ['test_prompt_with_image', 'A prompt with an image.', [],
        () => [{ role: 'user', content: { type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' } }, userText('Please analyze the image above.')]]
];
const DYNAMIC_PROMPT = ['test_dynamic_prompt', 'Listed only while test_trigger_prompt_change has switched it on.', [],
    () => [userText('test_dynamic_prompt rendered.')]];
const listedPrompts = () => (state.dynamicPrompt ? [...PROMPTS, DYNAMIC_PROMPT] : PROMPTS);

const PROMPT_CANDIDATES = ['paris', 'park', 'party', 'test-value'];
const ID_CANDIDATES = ['1', '2', '3', '123'];

function complete({ ref, argument }) {
    let candidates = [];
    if (ref.type === 'ref/prompt' && ref.name === 'test_prompt_with_arguments' && ['arg1', 'arg2'].includes(argument.name)) {
        candidates = PROMPT_CANDIDATES;
    } else if (ref.type === 'ref/resource' && ref.uri === TEMPLATE && argument.name === 'id') {
        candidates = ID_CANDIDATES;
    }
    const values = candidates.filter(c => c.startsWith(argument.value ?? ''));
    return { completion: { values, total: values.length, hasMore: false } };
}

// ---- one MCP server per session ------------------------------------------------------------------

function buildServer(session) {
    const server = new Server(
        { name: 'manifold-ts-v1-conformance-fixture', version: '1.0.0' },
        {
            capabilities: {
                tools: { listChanged: true },
                resources: { subscribe: true, listChanged: true },
                prompts: { listChanged: true },
                logging: {},
                completions: {}
            }
        }
    );
    server.setRequestHandler(types.ListToolsRequestSchema, async () => ({
        tools: listedTools().map(([name, description, inputSchema]) => ({ name, description, inputSchema }))
    }));
    server.setRequestHandler(types.CallToolRequestSchema, async (request, extra) => {
        const tool = listedTools().find(([name]) => name === request.params.name);
        if (!tool) throw new types.McpError(types.ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
        return tool[3](request.params.arguments ?? {}, extra, server);
    });
    server.setRequestHandler(types.ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
    server.setRequestHandler(types.ListResourceTemplatesRequestSchema, async () => ({
        resourceTemplates: [{ uriTemplate: TEMPLATE, name: 'template-data', title: 'Template data', description: 'JSON data for any id.', mimeType: 'application/json' }]
    }));
    server.setRequestHandler(types.ReadResourceRequestSchema, async request => ({ contents: [readResource(request.params.uri)] }));
    server.setRequestHandler(types.SubscribeRequestSchema, async request => {
        session.subscriptions.add(request.params.uri);
        return {};
    });
    server.setRequestHandler(types.UnsubscribeRequestSchema, async request => {
        session.subscriptions.delete(request.params.uri);
        return {};
    });
    server.setRequestHandler(types.ListPromptsRequestSchema, async () => ({
        prompts: listedPrompts().map(([name, description, args]) => ({
            name,
            description,
            ...(args.length ? { arguments: args.map(([n, d]) => ({ name: n, description: d, required: true })) } : {})
        }))
    }));
    server.setRequestHandler(types.GetPromptRequestSchema, async request => {
        const prompt = listedPrompts().find(([name]) => name === request.params.name);
        if (!prompt) throw new types.McpError(types.ErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
        const args = request.params.arguments ?? {};
        for (const [name] of prompt[2]) {
            if (typeof args[name] !== 'string') {
                throw new types.McpError(types.ErrorCode.InvalidParams, `prompt ${prompt[0]} needs the string argument "${name}"`);
            }
        }
        return { description: prompt[1], messages: prompt[3](args) };
    });
    server.setRequestHandler(types.CompleteRequestSchema, async request => complete(request.params));
    return server;
}

// ---- Streamable HTTP -----------------------------------------------------------------------------

const rpcError = (res, status, code, message) => res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });

// createMcpExpressApp on 127.0.0.1 refuses a non-localhost Host header (DNS rebinding protection).
const app = createMcpExpressApp({ host: HOST });
app.all('/mcp', async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    const known = sessionId ? sessions.get(sessionId) : undefined;
    if (known) return known.transport.handleRequest(req, res, req.body);
    if (sessionId) return rpcError(res, 404, -32001, `Session ${sessionId} not found: initialize a new session`);
    if (req.method !== 'POST' || !types.isInitializeRequest(req.body)) {
        return rpcError(res, 400, -32000, 'Bad Request: no valid session ID; send initialize first');
    }
    if (sessions.size >= MAX_SESSIONS) return rpcError(res, 503, -32000, `Too many open sessions (at most ${MAX_SESSIONS})`);
    const session = { subscriptions: new Set() };
    session.transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(),
        retryInterval: RETRY_INTERVAL_MS,
        onsessioninitialized: id => sessions.set(id, session)
    });
    session.transport.onclose = () => {
        if (session.transport.sessionId) sessions.delete(session.transport.sessionId);
    };
    session.server = buildServer(session);
    await session.server.connect(session.transport);
    return session.transport.handleRequest(req, res, req.body);
});

const portFlag = process.argv.indexOf('--port');
const port = portFlag >= 0 ? Number(process.argv[portFlag + 1]) : 0;
const listener = app.listen(port, HOST, () => {
    process.stdout.write(`listening on http://${HOST}:${listener.address().port}/mcp\n`);
});
listener.on('error', error => {
    process.stderr.write(`ts_v1_fixture: cannot listen on ${HOST}:${port}: ${error.message}\n`);
    process.exit(1);
});
for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
        for (const session of sessions.values()) session.transport.close().catch(() => {});
        listener.close(() => process.exit(0));
        setTimeout(() => process.exit(0), 1000).unref();
    });
}
