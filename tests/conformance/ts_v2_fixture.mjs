// Why: the conformance comparison (run-compare.sh) covers every SDK server Manifold is likely to front;
// this is the TypeScript SDK 2.x (@modelcontextprotocol/server 2.4.0, McpServer) offering the official
// suite's fixture tools, resources and prompts under their exact names, in both eras. Every question
// to the client (sampling, elicitation, roots) is written once, the SDK 2.x way, as a multi-round-trip
// `inputRequired(...)` return: the 2026-07-28 era hands it to the client as an input_required result,
// and for a 2025-era session the SDK's legacy shim turns it into real server->client requests.
//
// Wiring, as the SDK documents for a server that keeps its sessionful 2025 deployment next to the
// modern endpoint: `isLegacyRequest` routes 2025-era traffic to a sessionful
// WebStandardStreamableHTTPServerTransport (an event store, so streams resume and SSE polling works,
// and a standalone GET stream for list-changed and resource-updated notifications), and everything
// else to `createMcpHandler(factory, { legacy: 'reject' })`.
//
// usage: node tests/conformance/ts_v2_fixture.mjs [--port N]
//   binds 127.0.0.1 (port 0 = any free one) and prints `listening on http://127.0.0.1:PORT/mcp` as its
//   first stdout line. The SDK is resolved from $MANIFOLD_PEERS_DIR (default tests/peers).

import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PEERS = process.env.MANIFOLD_PEERS_DIR || path.join(HERE, '..', 'peers');
const requireFromPeers = createRequire(path.join(PEERS, 'package.json'));
const {
    McpServer,
    ResourceTemplate,
    WebStandardStreamableHTTPServerTransport,
    createMcpHandler,
    createRequestStateCodec,
    fromJsonSchema,
    hostHeaderValidationResponse,
    inputRequired,
    inputResponse,
    isLegacyRequest,
    localhostAllowedHostnames,
    localhostAllowedOrigins,
    originValidationResponse
} = await import(pathToFileURL(requireFromPeers.resolve('@modelcontextprotocol/server')).href);

const HOST = '127.0.0.1';
// How long a client waits before resuming a stream the server closed (the SSE `retry:` field).
const RETRY_INTERVAL_MS = 500;
// 2025-era sessions kept at once; a new one beyond this is refused with 503 rather than growing forever.
const MAX_SESSIONS = 256;
// Events kept per process for stream resumption; the oldest are dropped beyond this.
const MAX_STORED_EVENTS = 10_000;
// The pause between the steps of the logging and progress tools (the suite asks for about 50 ms).
const STEP_MS = 50;

const RED_PIXEL_PNG =
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FDAAAAAElFTkSuQmCC';
const SILENCE_WAV = 'UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==';

// The multi-round-trip state is HMAC-sealed by the SDK's codec; one process serves every round.
const stateCodec = createRequestStateCodec({ key: randomBytes(32) });

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const text = t => ({ content: [{ type: 'text', text: t }] });
const schema = json => fromJsonSchema(json);
const NO_ARGUMENTS = { type: 'object', properties: {} };
const textSchema = field => ({ type: 'object', properties: { [field]: { type: 'string' } }, required: [field] });
const stringArgument = (name, description) => ({
    type: 'object',
    properties: { [name]: { type: 'string', description } },
    required: [name]
});

// Process-wide state: the toggles the trigger tools flip, and the live 2025-era sessions to notify.
const state = { dynamicTool: false, dynamicPrompt: false, watchedVersion: 0 };
const sessions = new Map();
let modernHandler;

// ---- what the tools ask of the client ------------------------------------------------------------

const elicit = (message, requestedSchema) => inputRequired.elicit({ message, requestedSchema });
const sample = (prompt, maxTokens) =>
    inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens });

const describeElicitation = got =>
    got.kind === 'elicit' ? `action=${got.action}, content=${JSON.stringify(got.content ?? {})}` : `no answer (${got.kind})`;
const acceptedField = (got, field, fallback) =>
    got.kind === 'elicit' && got.action === 'accept' && got.content?.[field] !== undefined ? String(got.content[field]) : fallback;
const sampledText = got =>
    got.kind === 'sampling' && got.result?.content?.type === 'text' ? got.result.content.text : `(no text: ${got.kind})`;
const rootUris = got => (got.kind === 'roots' && got.roots?.length ? got.roots.map(root => root.uri).join(', ') : '(none)');

// Answers each question of `asks` ({key: inputRequest}) from the retried request, or asks for the missing
// ones (a wrong or missing key is asked again, not an error); `finish` gets the answers by key.
function askAll(ctx, asks, finish, requestState) {
    const answers = {};
    const missing = {};
    for (const [key, request] of Object.entries(asks)) {
        const got = inputResponse(ctx.mcpReq.inputResponses, key);
        if (got.kind === 'missing') missing[key] = request;
        else answers[key] = got;
    }
    if (Object.keys(missing).length) return inputRequired({ inputRequests: missing, ...(requestState ? { requestState } : {}) });
    return finish(answers);
}

function log(ctx, data) {
    return ctx.mcpReq.log('info', data);
}

async function progress(ctx, done) {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    if (progressToken === undefined) return;
    await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: done, total: 100 } });
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
const USER_INFO_SCHEMA = {
    type: 'object',
    properties: {
        username: { type: 'string', description: 'User\'s response' },
        email: { type: 'string', description: 'User\'s email address' }
    },
    required: ['username', 'email']
};

async function runWithLogging(_args, ctx) {
    await log(ctx, 'Tool execution started');
    await sleep(STEP_MS);
    await log(ctx, 'Tool processing data');
    await sleep(STEP_MS);
    await log(ctx, 'Tool execution completed');
    return text('Tool with logging executed successfully');
}

const greetElicited = (_args, ctx) =>
    askAll(ctx, { user_name: elicit('What is your name?', textSchema('name')) }, a =>
        text(`Hello, ${acceptedField(a.user_name, 'name', 'stranger')}!`));

// Sealed state names the round it belongs to, so a replayed or tampered state is refused by the codec.
async function multiRound(_args, ctx) {
    const round = ctx.mcpReq.requestState()?.round ?? 1;
    if (round === 1) {
        const got = inputResponse(ctx.mcpReq.inputResponses, 'step1');
        if (got.kind === 'missing' || ctx.mcpReq.requestState() === undefined) {
            return inputRequired({
                inputRequests: { step1: elicit('Step 1: What is your name?', textSchema('name')) },
                requestState: await stateCodec.mint({ round: 1 })
            });
        }
        return inputRequired({
            inputRequests: { step2: elicit('Step 2: What is your favorite color?', textSchema('color')) },
            requestState: await stateCodec.mint({ round: 2, name: acceptedField(got, 'name', 'stranger') })
        });
    }
    const got = inputResponse(ctx.mcpReq.inputResponses, 'step2');
    if (got.kind === 'missing') {
        return inputRequired({
            inputRequests: { step2: elicit('Step 2: What is your favorite color?', textSchema('color')) },
            requestState: await stateCodec.mint(ctx.mcpReq.requestState())
        });
    }
    return text(`${ctx.mcpReq.requestState().name} likes ${acceptedField(got, 'color', 'no colour')}`);
}

// A tool that needs sealed state: the first round mints it, a later round must carry it back intact
// (the codec's verify, run by the SDK before the handler, refuses a tampered one with -32602).
async function confirmWithState(ctx, tool, message, done) {
    const sealed = ctx.mcpReq.requestState();
    const got = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
    if (got.kind === 'missing' || sealed?.tool !== tool) {
        return inputRequired({
            inputRequests: { confirm: elicit(message, CONFIRM_SCHEMA) },
            requestState: await stateCodec.mint({ tool })
        });
    }
    return text(done(got));
}

// [name, description, inputSchema (JSON Schema), run(args, ctx)] in listing order; test_simple_text needs
// no arguments and comes first, as in the other fixtures.
const TOOLS = [
    ['test_simple_text', 'Returns a simple text content block.', NO_ARGUMENTS,
        async () => text('This is a simple text response for testing.')],
    ['test_image_content', 'Returns an image content block (a 1x1 red PNG).', NO_ARGUMENTS,
        async () => ({ content: [{ type: 'image', data: RED_PIXEL_PNG, mimeType: 'image/png' }] })],
    ['test_audio_content', 'Returns an audio content block (a short WAV).', NO_ARGUMENTS,
        async () => ({ content: [{ type: 'audio', data: SILENCE_WAV, mimeType: 'audio/wav' }] })],
    ['test_embedded_resource', 'Returns an embedded text resource.', NO_ARGUMENTS,
        async () => ({
            content: [{
                type: 'resource',
                resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' }
            }]
        })],
    ['test_multiple_content_types', 'Returns text, image and embedded resource content together.', NO_ARGUMENTS,
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
    ['test_tool_with_logging', 'Sends three info log messages while it runs.', NO_ARGUMENTS, runWithLogging],
    ['test_logging_tool', 'Like test_tool_with_logging: logs only as the request\'s log level allows.', NO_ARGUMENTS, runWithLogging],
    ['test_error_handling', 'Always fails with a tool execution error (isError: true).', NO_ARGUMENTS,
        async () => ({ ...text('This tool intentionally returns an error for testing'), isError: true })],
    ['test_tool_with_progress', 'Reports progress 0, 50 and 100 of 100 when the request carries a progress token.', NO_ARGUMENTS,
        async (_args, ctx) => {
            await progress(ctx, 0);
            await sleep(STEP_MS);
            await progress(ctx, 50);
            await sleep(STEP_MS);
            await progress(ctx, 100);
            return text('Tool with progress executed successfully');
        }],
    ['test_sampling', 'Asks the client\'s LLM to answer the prompt (sampling/createMessage).',
        stringArgument('prompt', 'The prompt to send to the LLM'),
        async (args, ctx) => askAll(ctx, { answer: sample(args.prompt, 100) }, a => text(`LLM response: ${sampledText(a.answer)}`))],
    ['test_elicitation', 'Asks the user for a username and an email (elicitation/create).',
        stringArgument('message', 'The message to show the user'),
        async (args, ctx) => askAll(ctx, { info: elicit(args.message, USER_INFO_SCHEMA) }, a =>
            text(`User response: ${describeElicitation(a.info)}`))],
    ['test_elicitation_sep1034_defaults', 'Elicits a form whose fields carry defaults (SEP-1034).', NO_ARGUMENTS,
        async (_args, ctx) => askAll(ctx,
            { form: elicit('Please review and update the form fields with defaults', ELICITATION_DEFAULTS_SCHEMA) },
            a => text(`Elicitation completed: ${describeElicitation(a.form)}`))],
    ['test_elicitation_sep1330_enums', 'Elicits a form using all five enum schema variants (SEP-1330).', NO_ARGUMENTS,
        async (_args, ctx) => askAll(ctx, { form: elicit('Please pick from each list', ELICITATION_ENUMS_SCHEMA) }, a =>
            text(`Elicitation completed: ${describeElicitation(a.form)}`))],
    ['json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features', JSON_SCHEMA_2020_12,
        async args => text(`json_schema_2020_12_tool received name=${args.name ?? '(no name)'}`)],
    ['test_reconnection', 'Closes its SSE stream after the priming event; the result follows on the resumed stream.', NO_ARGUMENTS,
        async (_args, ctx) => {
            await sleep(STEP_MS);
            ctx.http?.closeSSE?.();
            await sleep(4 * STEP_MS);
            return text('Reconnection test completed: the result arrived after the stream was closed');
        }],
    ['test_missing_capability', 'Needs the client\'s sampling capability.', NO_ARGUMENTS,
        async (_args, ctx) => askAll(ctx, { answer: sample('Say anything.', 10) }, a =>
            text(`The client declared sampling and answered: ${sampledText(a.answer)}`))],
    ['test_streaming_elicitation', 'Asks the user for a name.', NO_ARGUMENTS, greetElicited],
    ['test_trigger_tool_change', 'Adds or removes test_dynamic_tool and announces notifications/tools/list_changed.', NO_ARGUMENTS,
        async () => {
            state.dynamicTool = !state.dynamicTool;
            // enable()/disable() on a connected McpServer announces the change on that session.
            for (const session of sessions.values()) session.dynamicTool?.[state.dynamicTool ? 'enable' : 'disable']();
            modernHandler?.notify.toolsChanged();
            return text(`test_dynamic_tool is now ${state.dynamicTool ? 'listed' : 'removed'}; notifications/tools/list_changed was announced`);
        }],
    ['test_trigger_prompt_change', 'Adds or removes test_dynamic_prompt and announces notifications/prompts/list_changed.', NO_ARGUMENTS,
        async () => {
            state.dynamicPrompt = !state.dynamicPrompt;
            for (const session of sessions.values()) session.dynamicPrompt?.[state.dynamicPrompt ? 'enable' : 'disable']();
            modernHandler?.notify.promptsChanged();
            return text(`test_dynamic_prompt is now ${state.dynamicPrompt ? 'listed' : 'removed'}; notifications/prompts/list_changed was announced`);
        }],
    ['test_trigger_resource_update', 'Changes a resource and announces notifications/resources/updated to its subscribers.',
        { type: 'object', properties: { uri: { type: 'string', description: 'The resource that changed (default test://watched-resource)' } } },
        async args => {
            const uri = typeof args.uri === 'string' ? args.uri : WATCHED;
            if (uri === WATCHED) state.watchedVersion += 1;
            for (const session of sessions.values()) {
                if (session.subscriptions.has(uri)) await session.server.server.sendResourceUpdated({ uri });
            }
            modernHandler?.notify.resourceUpdated(uri);
            return text(`notifications/resources/updated was announced for ${uri}`);
        }],
    ['test_custom_header', 'Echoes its region argument (SEP-2243 mirrors it into the Mcp-Param-Region header).',
        {
            type: 'object',
            properties: { region: { type: 'string', description: 'A region name; mirrored into the Mcp-Param-Region header over HTTP', 'x-mcp-header': 'Region' } },
            required: ['region']
        },
        async args => text(`Region: ${args.region}`)],
    ['test_input_required_result_elicitation', 'Asks for the user\'s name and greets them.', NO_ARGUMENTS, greetElicited],
    ['test_input_required_result_sampling', 'Asks the client\'s LLM for the capital of France.', NO_ARGUMENTS,
        async (_args, ctx) => askAll(ctx, { capital_question: sample('What is the capital of France?', 100) }, a =>
            text(`The model answered: ${sampledText(a.capital_question)}`))],
    ['test_input_required_result_list_roots', 'Asks for the client\'s roots (roots/list) and lists them.', NO_ARGUMENTS,
        async (_args, ctx) => askAll(ctx, { client_roots: inputRequired.listRoots() }, a =>
            text(`The client's roots: ${rootUris(a.client_roots)}`))],
    ['test_input_required_result_request_state', 'Asks for a confirmation, with sealed state.', NO_ARGUMENTS,
        async (_args, ctx) => confirmWithState(ctx, 'test_input_required_result_request_state', 'Please confirm', got =>
            `state-ok: the sealed requestState came back intact (${describeElicitation(got)})`)],
    ['test_input_required_result_multiple_inputs', 'Asks for an elicitation, a sampling and the roots at once.', NO_ARGUMENTS,
        async (_args, ctx) => askAll(ctx, {
            user_name: elicit('What is your name?', textSchema('name')),
            greeting: sample('Generate a greeting', 50),
            client_roots: inputRequired.listRoots()
        }, a => text(`name=${acceptedField(a.user_name, 'name', 'stranger')}; greeting=${sampledText(a.greeting)}; roots=${rootUris(a.client_roots)}`),
        await stateCodec.mint({ tool: 'test_input_required_result_multiple_inputs' }))],
    ['test_input_required_result_multi_round', 'Asks for a name, then a favourite colour, then answers.', NO_ARGUMENTS, multiRound],
    ['test_input_required_result_tampered_state', 'Asks for a confirmation; its state is sealed.', NO_ARGUMENTS,
        async (_args, ctx) => confirmWithState(ctx, 'test_input_required_result_tampered_state', 'Please confirm (state is sealed)', got =>
            `Confirmed with an intact requestState: ${describeElicitation(got)}`)],
    ['test_input_required_result_capabilities', 'Asks only for inputs the client declared capabilities for.', NO_ARGUMENTS,
        async (_args, ctx, server) => {
            const declared = ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities']
                ?? server.server.getClientCapabilities() ?? {};
            const asks = {};
            if (declared.elicitation) asks.user_name = elicit('What is your name?', textSchema('name'));
            if (declared.sampling) asks.greeting = sample('Generate a greeting', 50);
            if (declared.roots) asks.client_roots = inputRequired.listRoots();
            if (Object.keys(asks).length === 0) return text('The client declared none of elicitation, sampling and roots, so nothing was asked');
            return askAll(ctx, asks, a => text(`Answered inputs: ${Object.keys(a).sort().join(', ')}`));
        }],
    ['greet', 'Returns Hello, {name}! at once.', stringArgument('name', 'Who to greet'),
        async args => text(`Hello, ${args.name}!`)]
];

const DYNAMIC_TOOL = ['test_dynamic_tool', 'Listed only while test_trigger_tool_change has switched it on.', NO_ARGUMENTS,
    async () => text('test_dynamic_tool answered; test_trigger_tool_change removes it again')];

// ---- resources -----------------------------------------------------------------------------------

const STATIC_TEXT = 'test://static-text';
const STATIC_BINARY = 'test://static-binary';
const WATCHED = 'test://watched-resource';
const TEMPLATE = 'test://template/{id}/data';

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

function registerResources(server) {
    server.registerResource('static-text', STATIC_TEXT,
        { title: 'Static text', description: 'A text resource whose content never changes.', mimeType: 'text/plain' },
        async uri => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] }));
    server.registerResource('static-binary', STATIC_BINARY,
        { title: 'Static binary', description: 'A binary resource (a 1x1 red PNG).', mimeType: 'image/png' },
        async uri => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: RED_PIXEL_PNG }] }));
    server.registerResource('watched-resource', WATCHED,
        { title: 'Watched resource', description: 'Changes whenever test_trigger_resource_update runs.', mimeType: 'text/plain' },
        async uri => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: `Watched resource, version ${state.watchedVersion}.` }] }));
    server.registerResource('template-data', new ResourceTemplate(TEMPLATE, { list: undefined }),
        { title: 'Template data', description: 'JSON data for any id.', mimeType: 'application/json' },
        async (uri, { id }) => ({
            contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }]
        }));
}

// ---- prompts -------------------------------------------------------------------------------------

const userText = t => ({ role: 'user', content: { type: 'text', text: t } });
const promptArgs = names => ({
    type: 'object',
    properties: Object.fromEntries(names.map(([n, d]) => [n, { type: 'string', description: d }])),
    required: names.map(([n]) => n)
});
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

// Returns the registered test_dynamic_prompt, listed only while state.dynamicPrompt is on.
function registerPrompts(server) {
    let dynamic;
    for (const [name, description, args, render] of [...PROMPTS, DYNAMIC_PROMPT]) {
        const config = args.length ? { description, argsSchema: schema(promptArgs(args)) } : { description };
        const prompt = server.registerPrompt(name, config,
            args.length ? a => ({ description, messages: render(a) }) : () => ({ description, messages: render({}) }));
        if (name === DYNAMIC_PROMPT[0]) dynamic = prompt;
    }
    server.registerPrompt('test_input_required_result_prompt', { description: 'A prompt that first asks for its context.' }, ctx =>
        askAll(ctx, { user_context: elicit('What context should the prompt use?', textSchema('context')) }, a =>
            ({ messages: [userText(`Prompt with context: ${acceptedField(a.user_context, 'context', '(none)')}`)] })));
    if (!state.dynamicPrompt) dynamic.disable();
    return dynamic;
}

// ---- one McpServer per 2025-era session or per 2026-era request ----------------------------------

function buildServer(session) {
    const server = new McpServer(
        { name: 'manifold-ts-v2-conformance-fixture', version: '1.0.0' },
        {
            capabilities: {
                tools: { listChanged: true },
                resources: { subscribe: true, listChanged: true },
                prompts: { listChanged: true },
                logging: {},
                completions: {}
            },
            requestState: { verify: stateCodec.verify }
        }
    );
    for (const [name, description, inputSchema, run] of [...TOOLS, DYNAMIC_TOOL]) {
        const tool = server.registerTool(name, { description, inputSchema: schema(inputSchema) },
            (args, ctx) => run(args ?? {}, ctx, server));
        if (name !== DYNAMIC_TOOL[0]) continue;
        if (!state.dynamicTool) tool.disable();
        if (session) session.dynamicTool = tool;
    }
    registerResources(server);
    const dynamicPrompt = registerPrompts(server);
    if (session) session.dynamicPrompt = dynamicPrompt;
    server.server.setRequestHandler('completion/complete', async request => complete(request.params));
    if (session) {
        server.server.setRequestHandler('resources/subscribe', async request => {
            session.subscriptions.add(request.params.uri);
            return {};
        });
        server.server.setRequestHandler('resources/unsubscribe', async request => {
            session.subscriptions.delete(request.params.uri);
            return {};
        });
    }
    return server;
}

// ---- Streamable HTTP -----------------------------------------------------------------------------

// Resumable streams for the 2025-era sessions: every event is kept (up to MAX_STORED_EVENTS) so a client
// that reconnects with Last-Event-ID gets what it missed on that stream.
const events = new Map();
const eventStore = {
    async storeEvent(streamId, message) {
        const eventId = `${streamId}_${randomUUID()}`;
        events.set(eventId, { streamId, message });
        if (events.size > MAX_STORED_EVENTS) events.delete(events.keys().next().value);
        return eventId;
    },
    async getStreamIdForEventId(eventId) {
        return events.get(eventId)?.streamId;
    },
    async replayEventsAfter(lastEventId, { send }) {
        const streamId = events.get(lastEventId)?.streamId;
        if (streamId === undefined) return '';
        let after = false;
        for (const [eventId, event] of events) {
            if (after && event.streamId === streamId) await send(eventId, event.message);
            if (eventId === lastEventId) after = true;
        }
        return streamId;
    }
};

const rpcError = (status, code, message) =>
    Response.json({ jsonrpc: '2.0', error: { code, message }, id: null }, { status });

async function serveLegacy(request) {
    const sessionId = request.headers.get('mcp-session-id');
    const known = sessionId ? sessions.get(sessionId) : undefined;
    if (known) return known.transport.handleRequest(request);
    if (sessionId) return rpcError(404, -32001, `Session ${sessionId} not found: initialize a new session`);
    const body = request.method === 'POST' ? await request.clone().json().catch(() => undefined) : undefined;
    if (body?.method !== 'initialize') return rpcError(400, -32000, 'Bad Request: no valid session ID; send initialize first');
    if (sessions.size >= MAX_SESSIONS) return rpcError(503, -32000, `Too many open sessions (at most ${MAX_SESSIONS})`);
    const session = { subscriptions: new Set() };
    session.transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore,
        retryInterval: RETRY_INTERVAL_MS,
        onsessioninitialized: id => sessions.set(id, session),
        onsessionclosed: id => sessions.delete(id)
    });
    session.transport.onclose = () => {
        if (session.transport.sessionId) sessions.delete(session.transport.sessionId);
    };
    session.server = buildServer(session);
    await session.server.connect(session.transport);
    return session.transport.handleRequest(request);
}

// node:http speaks IncomingMessage/ServerResponse; the SDK speaks fetch Request/Response.
function toWebRequest(req, signal) {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
        if (Array.isArray(value)) value.forEach(v => headers.append(name, v));
        else if (value !== undefined) headers.set(name, value);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    return new Request(`http://${req.headers.host ?? HOST}${req.url}`, {
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

modernHandler = createMcpHandler(() => buildServer(undefined), {
    legacy: 'reject',
    onerror: err => process.stderr.write(`ts_v2_fixture: ${err.message}\n`)
});
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
        const rejected = hostHeaderValidationResponse(request, allowedHosts) ?? originValidationResponse(request, allowedOrigins);
        const response = rejected ?? ((await isLegacyRequest(request)) ? await serveLegacy(request) : await modernHandler.fetch(request));
        await writeWebResponse(response, res);
    } catch (err) {
        process.stderr.write(`ts_v2_fixture: request failed: ${err.stack ?? err}\n`);
        if (!res.headersSent) res.writeHead(500);
        res.end();
    }
});

const portFlag = process.argv.indexOf('--port');
const port = portFlag >= 0 ? Number(process.argv[portFlag + 1]) : 0;
http.listen(port, HOST, () => process.stdout.write(`listening on http://${HOST}:${http.address().port}/mcp\n`));
http.on('error', error => {
    process.stderr.write(`ts_v2_fixture: cannot listen on ${HOST}:${port}: ${error.message}\n`);
    process.exit(1);
});
for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
        for (const session of sessions.values()) session.transport.close().catch(() => {});
        modernHandler.close().catch(() => {});
        http.close(() => process.exit(0));
        setTimeout(() => process.exit(0), 1000).unref();
    });
}
