// Why: the operators' dashboard (`manifold serve`, /ui) is only proven by a person's path through it in
// a real browser: sign in, watch a server fall and come back, find and call a tool, answer held calls a
// real client waits on, manage keys, change the configuration, and be refused every forged request.
// crates/manifold/tests/dashboard_browser.rs starts the gateway and its upstreams and runs this script,
// which drives Debian's Chromium through the pinned playwright-core (tests/browser/package.json; never a
// downloaded browser), prints one JSON line per step and exits 1 at the first failure, saying which
// selector or value was wrong and showing the page's HTML around it.
//
// usage: node dashboard.mjs PLAN_JSON
// PLAN_JSON: {"dashboard": "http://127.0.0.1:P/ui", "mcp": "http://127.0.0.1:P/mcp", "manifold": BIN,
//             "adminName", "adminKey", "userName", "userKey" (a key without the admin scope),
//             "gatewayPid", "webState" (peer_server.py's STATE_DIR), "configPath", "secret" (a value of
//             the configuration the dashboard must not show), "extraServer" (TOML of a server to add),
//             "authoredTool" (an authored tool with versions 1 and 2)}
// env: MANIFOLD_CHROMIUM (the browser), MANIFOLD_BROWSER_DIR (holds node_modules/playwright-core),
//      MANIFOLD_SCREENSHOTS=DIR (optional: a full-page PNG of each page into DIR),
//      MANIFOLD_DASHBOARD_STEPS=NAME,... (optional: only these steps, after sign-in).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const plan = JSON.parse(process.argv[2] ?? '{}');
const CHROMIUM = process.env.MANIFOLD_CHROMIUM;
const BROWSER_DIR = process.env.MANIFOLD_BROWSER_DIR;
const SHOTS = process.env.MANIFOLD_SCREENSHOTS || '';

/** How long a live page may take to show a change (a restart, a held call, a reload): a hang guard. */
const LIVE_DEADLINE_MS = 60_000;
/** How long one page action or navigation may take on two busy cores: a hang guard. */
const ACTION_TIMEOUT_MS = 30_000;
/** How long a client started by this script may run. */
const CLIENT_DEADLINE_MS = 120_000;

const HTML_DESCRIPTION = '<img src=x onerror=alert(1)><b>bold</b>';
const HTML_RESULT = '<script>window.pwned=1</script>';
const FOREIGN_ORIGIN = 'http://evil.example';

function emit(record) {
  process.stdout.write(`${JSON.stringify(record)}\n`);
}

/** A failed expectation: what was wanted, where (selector), and what the page showed. */
class Failure extends Error {
  constructor(message, selector) {
    super(message);
    this.selector = selector;
  }
}

function fail(message, selector) {
  throw new Failure(message, selector);
}

function check(condition, message, selector) {
  if (!condition) fail(message, selector);
}

if (!CHROMIUM || !BROWSER_DIR) {
  emit({ step: 'setup', ok: false, error: 'MANIFOLD_CHROMIUM and MANIFOLD_BROWSER_DIR must be set; run scripts/install-peers --env' });
  process.exit(1);
}
const entry = path.join(BROWSER_DIR, 'node_modules', 'playwright-core', 'index.mjs');
if (!fs.existsSync(entry)) {
  emit({ step: 'setup', ok: false, error: `${entry} is missing; run scripts/install-peers` });
  process.exit(1);
}
const { chromium } = await import(pathToFileURL(entry).href);

const ui = plan.dashboard.replace(/\/$/, '');
const origin = new URL(ui).origin;
const at = (p) => `${ui}${p}`;

// ---------------------------------------------------------------------------------------------
// Processes: the clients this script starts, and the upstream it kills.

const children = new Set();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Runs `manifold ARGS...` as a real MCP client; `.done` resolves to {code, stdout, stderr}. */
function manifold(args) {
  const child = spawn(plan.manifold, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const done = new Promise((resolve, reject) => {
    const guard = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Failure(`manifold ${args.slice(0, 3).join(' ')} ran past ${CLIENT_DEADLINE_MS} ms`));
    }, CLIENT_DEADLINE_MS);
    child.on('exit', (code, signal) => {
      clearTimeout(guard);
      children.delete(child);
      resolve({ code: code ?? signal, stdout, stderr });
    });
  });
  return { child, done };
}

function callAs(key, tool, args) {
  return manifold(['call', plan.mcp, tool, ...args, '-H', `Authorization: Bearer ${key}`]);
}

/** The live processes below `root` whose command line contains every needle. */
function descendants(root, needles) {
  const kids = new Map();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') continue;
    const ppid = Number(fields[1]);
    if (!kids.has(ppid)) kids.set(ppid, []);
    kids.get(ppid).push(Number(name));
  }
  const found = [];
  const stack = [Number(root)];
  while (stack.length) {
    for (const pid of kids.get(stack.pop()) ?? []) {
      stack.push(pid);
      let cmd = '';
      try {
        cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      } catch {
        continue;
      }
      if (needles.every((n) => cmd.includes(n))) found.push(pid);
    }
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Page helpers: every wait is bounded, and every failure says what it waited for.

/** Opens `url` in `page`; a navigation the browser refuses (an error status with no body, a
 * refused connection) fails saying what the server answered. */
async function go(page, url) {
  try {
    return await page.goto(url, { waitUntil: 'load' });
  } catch (e) {
    const first = String(e.message).split('\n')[0];
    const answer = await page.request.get(url, { maxRedirects: 0 }).then(
      async (r) => `${r.status()} ${JSON.stringify((await r.text()).slice(0, 300))}`,
      (err) => `nothing (${String(err.message).split('\n')[0]})`,
    );
    fail(`GET ${url} failed in the browser (${first}); the server answers ${answer}`);
  }
}

async function excerpt(page) {
  try {
    await page.waitForLoadState('load', { timeout: 5000 }).catch(() => {});
    return await page.evaluate(() => {
      const root = document.querySelector('main') ?? document.body;
      return root ? root.outerHTML.slice(0, 2500) : document.documentElement.outerHTML.slice(0, 2500);
    });
  } catch (e) {
    return `(no excerpt: ${e.message})`;
  }
}

async function shot(page, name) {
  if (!SHOTS) return;
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, name), fullPage: true });
}

/** Waits for `selector` to be in the page; the element handle. */
async function need(page, selector, what = selector, timeout = ACTION_TIMEOUT_MS) {
  try {
    return await page.waitForSelector(selector, { state: 'attached', timeout });
  } catch {
    fail(`${what}: no element matches ${selector}`, selector);
  }
}

async function absent(page, selector, what) {
  const n = await page.locator(selector).count();
  check(n === 0, `${what}: ${n} element(s) match ${selector}, expected none`, selector);
}

async function text(page, selector) {
  await need(page, selector);
  return (await page.locator(selector).first().textContent()).trim();
}

/** Waits, without reloading, until the text of `selector` matches `re`; that text. */
async function waitText(page, selector, re, what, timeout = LIVE_DEADLINE_MS) {
  try {
    await page.waitForFunction(
      ([sel, src, flags]) => {
        const el = document.querySelector(sel);
        return !!el && new RegExp(src, flags).test(el.textContent.trim());
      },
      [selector, re.source, re.flags],
      { timeout, polling: 100 },
    );
  } catch {
    const seen = await page.locator(selector).first().textContent({ timeout: 1000 }).catch(() => null);
    fail(`${what}: ${selector} never read ${re} within ${timeout} ms (it reads ${JSON.stringify(seen?.trim() ?? null)})`, selector);
  }
  return (await page.locator(selector).first().textContent()).trim();
}

/** Reloads `url` until `probe(page)` is truthy; its value. For what the contract does not promise live. */
async function pollPage(page, url, probe, what, timeout = LIVE_DEADLINE_MS) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    await go(page, url);
    last = await probe(page);
    if (last) return last;
    if (Date.now() > deadline) fail(`${what} (reloaded ${url} for ${timeout} ms)`);
    await page.waitForTimeout(250);
  }
}

/** Submits the form (its own submit button, or `button`) and waits for the page that answers. */
async function submit(page, formSelector, button) {
  await need(page, formSelector);
  const form = page.locator(formSelector).first();
  const csrf = await form.locator('input[name=csrf]').count();
  const method = ((await form.getAttribute('method')) ?? 'get').toLowerCase();
  // The sign-in form comes before any session, so it has no token: its POST is guarded by its Origin.
  if (method === 'post' && formSelector !== 'form#signin') check(csrf === 1, `${formSelector} changes something but has no hidden input[name=csrf]`, `${formSelector} input[name=csrf]`);
  const control = button
    ? form.locator(button)
    : form.locator('button[type=submit], input[type=submit], button:not([type])').first();
  if ((await control.count()) === 0) fail(`${formSelector} has no submit button${button ? ` ${button}` : ''}`, `${formSelector} ${button ?? 'button'}`);
  const [response] = await Promise.all([
    page.waitForNavigation({ waitUntil: 'load', timeout: ACTION_TIMEOUT_MS }),
    control.click(),
  ]);
  return response;
}

async function expectFlash(page, what) {
  const error = await page.locator('p.error').count();
  if (error) fail(`${what}: the page shows p.error ${JSON.stringify((await page.locator('p.error').first().textContent()).trim())}`, 'p.error');
  return text(page, 'p.flash');
}

/** The fields of a form as the browser would send them, and where to. */
async function formOf(page, selector) {
  await need(page, selector);
  return page.locator(selector).first().evaluate((form) => ({
    action: new URL(form.getAttribute('action') ?? '', document.baseURI).href,
    method: (form.getAttribute('method') ?? 'get').toLowerCase(),
    fields: Object.fromEntries(new FormData(form).entries()),
  }));
}

const NAV = ['/ui/', '/ui/catalog', '/ui/playground', '/ui/calls', '/ui/audit', '/ui/approvals', '/ui/authored', '/ui/keys', '/ui/config'];

async function openPage(page, p, mainId) {
  const response = await go(page, at(p));
  check(response && response.status() === 200, `GET ${p} answered ${response?.status()} at ${page.url()}`);
  await need(page, `main#page-${mainId}`, `GET ${p}`);
  await need(page, 'nav#nav', `GET ${p}`);
  await need(page, 'form#signout', `GET ${p}`);
  const links = await page.locator('nav#nav a').evaluateAll((as) => as.map((a) => new URL(a.href).pathname));
  for (const want of NAV) check(links.includes(want), `nav#nav on ${p} lacks a link to ${want} (it has ${links.join(', ')})`, 'nav#nav a');
  return response;
}

async function signIn(page, credential) {
  await go(page, at('/login'));
  await need(page, 'form#signin input[name=credential]', 'the sign-in page');
  await page.fill('form#signin input[name=credential]', credential);
  return submit(page, 'form#signin');
}

async function cookieOf(context) {
  return (await context.cookies()).find((c) => c.name === 'manifold_ui');
}

// ---------------------------------------------------------------------------------------------
// The scenario.

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  // Chromium's own sandbox cannot start as root (the test machines run as root); Playwright's
  // default (chromiumSandbox false) passes --no-sandbox, written out here so it is not a surprise.
  chromiumSandbox: false,
  args: ['--no-sandbox'],
  timeout: ACTION_TIMEOUT_MS,
});
const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
context.setDefaultTimeout(ACTION_TIMEOUT_MS);
const page = await context.newPage();
const dialogs = [];
page.on('dialog', (d) => {
  dialogs.push(d.message());
  d.dismiss().catch(() => {});
});

const steps = [];
const current = page;

function step(name, body) {
  steps.push([name, body]);
}

step('sign-in-refuses-a-wrong-key', async () => {
  const response = await signIn(page, 'mfk_0000000000000000_not-a-key');
  check(response.status() === 401, `a wrong key answered ${response.status()}, expected 401`);
  const message = await text(page, 'p.error');
  check(!(await cookieOf(context)), 'a wrong key set the manifold_ui cookie');
  return { message };
});

step('sign-in-refuses-a-non-admin-key', async () => {
  const response = await signIn(page, plan.userKey);
  check(response.status() === 403, `a key without the admin scope answered ${response.status()}, expected 403`);
  const message = await text(page, 'p.error');
  check(/admin/i.test(message), `the 403 page's p.error does not mention the admin scope: ${JSON.stringify(message)}`, 'p.error');
  check(!(await cookieOf(context)), 'a non-admin key set the manifold_ui cookie');
  return { message };
});

step('sign-in', async () => {
  const response = await signIn(page, plan.adminKey);
  const redirect = response.request().redirectedFrom();
  check(redirect && redirect.method() === 'POST', `signing in did not redirect (final ${response.status()} at ${page.url()})`);
  const posted = await redirect.response();
  check(posted.status() === 303, `POST /ui/login answered ${posted.status()}, expected 303`);
  check(new URL(page.url()).pathname === '/ui/', `signing in landed on ${page.url()}, expected /ui/`);
  const cookie = await cookieOf(context);
  check(cookie, 'signing in set no manifold_ui cookie');
  await need(page, 'main#page-overview', 'the page after signing in');
  return { cookie: { httpOnly: cookie.httpOnly, sameSite: cookie.sameSite, path: cookie.path } };
});

let restartsBefore = 0;
step('overview', async () => {
  await openPage(page, '/', 'overview');
  for (const server of ['py', 'web']) {
    await waitText(page, `tr[data-server="${server}"] td.state`, /^up$/, `server ${server} on the overview`);
    for (const cell of ['era', 'tools', 'restarts']) await need(page, `tr[data-server="${server}"] td.${cell}`);
  }
  const readiness = await waitText(page, '#readiness', /^ready$/i, 'readiness with every server up');
  restartsBefore = Number.parseInt(await text(page, 'tr[data-server="web"] td.restarts'), 10);
  check(Number.isFinite(restartsBefore), 'td.restarts of web is not a number', 'tr[data-server="web"] td.restarts');
  const row = await text(page, 'tr[data-server="web"]');
  await shot(page, 'overview.png');
  return { readiness, web: row.replace(/\s+/g, ' ') };
});

step('a-server-goes-down-and-comes-back', async () => {
  // The gate keeps it down until the page has shown it; the variant changes its tool's definition.
  fs.writeFileSync(path.join(plan.webState, 'gate'), '');
  fs.writeFileSync(path.join(plan.webState, 'variant'), '');
  const pids = descendants(plan.gatewayPid, ['peer_server.py', plan.webState]);
  check(pids.length > 0, `no peer_server.py process under the gateway (pid ${plan.gatewayPid})`);
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  const down = await waitText(page, 'tr[data-server="web"] td.state', /^(down|crash-loop)$/, 'the killed server, live on the overview (no reload)');
  const readiness = await waitText(page, '#readiness', /not ready/i, 'readiness while web is down');
  fs.rmSync(path.join(plan.webState, 'gate'));
  await waitText(page, 'tr[data-server="web"] td.state', /^up$/, 'the server coming back, live on the overview');
  const restarts = Number.parseInt(await text(page, 'tr[data-server="web"] td.restarts'), 10);
  check(restarts > restartsBefore, `td.restarts of web reads ${restarts}, was ${restartsBefore} before the kill`, 'tr[data-server="web"] td.restarts');
  await waitText(page, '#readiness', /^ready$/i, 'readiness once web is back');
  return { killed: pids, down, readiness, restarts };
});

step('catalog', async () => {
  await openPage(page, '/catalog', 'catalog');
  for (const tool of ['py__echo', 'py__add', 'web__shout', 'web__html_note', plan.authoredTool]) {
    await need(page, `table#tools tr[data-tool="${tool}"]`, 'the catalog');
    await need(page, `table#tools tr[data-tool="${tool}"] a.tool[href$="/ui/catalog/tools/${tool}"]`, `the link to ${tool}'s page`);
  }
  const resources = await text(page, 'table#resources');
  check(resources.includes('test://python/hello'), `table#resources lacks test://python/hello: ${resources.slice(0, 300)}`, 'table#resources');
  const templates = await text(page, 'table#templates');
  check(templates.includes('greet/{name}'), `table#templates lacks test://python/greet/{name}: ${templates.slice(0, 300)}`, 'table#templates');
  const prompts = await text(page, 'table#prompts');
  check(prompts.includes('greeting'), `table#prompts lacks py__greeting: ${prompts.slice(0, 300)}`, 'table#prompts');
  await shot(page, 'catalog.png');
  await go(page, at('/catalog?q=html'));
  await need(page, 'table#tools tr[data-tool="web__html_note"]', 'searching the catalog for "html"');
  await absent(page, 'table#tools tr[data-tool="py__echo"]', 'searching the catalog for "html"');
  return {};
});

step('html-in-a-description-is-shown-as-text', async () => {
  const cell = 'table#tools tr[data-tool="web__html_note"] td.description';
  const shown = await text(page, cell);
  check(shown.includes(HTML_DESCRIPTION), `${cell} reads ${JSON.stringify(shown)}, expected the markup as text`, cell);
  await absent(page, 'table#tools tr[data-tool="web__html_note"] b, table#tools tr[data-tool="web__html_note"] img', 'the description became markup');
  await absent(page, 'img[src="x"]', 'an <img src=x> from a description');
  check(dialogs.length === 0, `a dialog opened: ${dialogs.join(' | ')}`);
  return { shown };
});

step('a-changed-pin-is-approved', async () => {
  await go(page, at('/catalog'));
  const form = 'section#changed-pins form.approve-pins[data-server="web"]';
  await need(page, form, 'web restarted with a changed tool definition');
  const pins = await text(page, 'section#changed-pins');
  await submit(page, form);
  const flash = await expectFlash(page, 'approving web\'s pins');
  await go(page, at('/catalog'));
  await absent(page, form, 'after approving web\'s pins');
  return { pins: pins.replace(/\s+/g, ' ').slice(0, 200), flash };
});

step('tool-page', async () => {
  await go(page, at('/catalog'));
  await Promise.all([
    page.waitForNavigation({ waitUntil: 'load' }),
    page.locator('table#tools tr[data-tool="web__html_note"] a.tool').first().click(),
  ]);
  await need(page, 'main#page-tool', 'the tool page');
  const schema = await text(page, 'pre#schema');
  check(schema.includes('note'), `pre#schema lacks the property "note": ${schema}`, 'pre#schema');
  await need(page, '#annotations');
  await need(page, '#pin');
  const body = await text(page, 'main#page-tool');
  check(body.includes(HTML_DESCRIPTION), 'the tool page does not show the description as text', 'main#page-tool');
  await absent(page, 'main#page-tool b, main#page-tool img', 'markup from the description on the tool page');
  const tryIt = await need(page, 'a#try');
  const href = new URL(await tryIt.getAttribute('href'), page.url());
  check(href.pathname === '/ui/playground' && href.searchParams.get('tool') === 'web__html_note', `a#try links to ${href}, expected /ui/playground?tool=web__html_note`, 'a#try');
  check(dialogs.length === 0, `a dialog opened: ${dialogs.join(' | ')}`);
  await shot(page, 'tool.png');
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('a#try')]);
  await need(page, 'main#page-playground', 'following a#try');
  await need(page, 'form#playground select[name=tool]', 'the playground opened by a#try');
  const chosen = await page.locator('form#playground select[name=tool]').inputValue();
  check(chosen === 'web__html_note', `the playground opened on ${chosen}, expected web__html_note`, 'select[name=tool]');
  return { href: href.pathname + href.search };
});

step('html-in-a-result-is-shown-as-text', async () => {
  await submit(page, 'form#playground', 'button#call');
  await need(page, 'section#outcome', 'the playground\'s answer');
  const result = await text(page, 'section#outcome pre#result');
  check(result.includes(HTML_RESULT), `pre#result reads ${JSON.stringify(result)}, expected the markup as text`, 'pre#result');
  await absent(page, 'section#outcome script', 'a <script> from a result');
  const pwned = await page.evaluate(() => window.pwned);
  check(pwned === undefined, `window.pwned is ${pwned}: the result ran as script`);
  await absent(page, 'section#outcome #is-error', 'a successful call marked as an error');
  return { result };
});

step('playground-calls-a-tool-with-fields', async () => {
  await openPage(page, '/playground?tool=web__shout', 'playground');
  await need(page, 'form#playground input[name="arg.text"]', 'the field of shout\'s property "text"');
  await need(page, 'form#playground select[name=as] option[value=""]', 'the signed-in identity in select[name=as]');
  await need(page, 'form#playground textarea[name=arguments]');
  await page.fill('form#playground input[name="arg.text"]', 'hello from the browser');
  await submit(page, 'form#playground', 'button#call');
  const result = await text(page, 'section#outcome pre#result');
  check(result.includes('HELLO FROM THE BROWSER!'), `pre#result reads ${JSON.stringify(result)}`, 'pre#result');
  await absent(page, 'section#outcome #is-error', 'a successful call marked as an error');
  await need(page, 'section#outcome ol#progress');
  await need(page, 'section#outcome ol#log');
  await shot(page, 'playground.png');
  return { result };
});

step('playground-raw-json-wins-and-errors-show', async () => {
  await go(page, at('/playground?tool=web__shout'));
  await page.fill('form#playground input[name="arg.text"]', 'ignored');
  await page.fill('form#playground textarea[name=arguments]', '{"text": "raw json"}');
  await submit(page, 'form#playground', 'button#call');
  const result = await text(page, 'section#outcome pre#result');
  check(result.includes('RAW JSON!'), `the raw JSON did not win over the fields: pre#result reads ${JSON.stringify(result)}`, 'pre#result');
  await go(page, at('/playground?tool=web__shout'));
  await page.fill('form#playground textarea[name=arguments]', '{"text": 7, "extra": [');
  await submit(page, 'form#playground', 'button#call');
  const refused = (await page.locator('p.error').count()) > 0 || (await page.locator('#is-error').count()) > 0;
  check(refused, 'malformed JSON arguments showed neither p.error nor #is-error', 'p.error, #is-error');
  await go(page, at('/playground?tool=web__shout'));
  await page.fill('form#playground textarea[name=arguments]', '{}');
  await submit(page, 'form#playground', 'button#call');
  await need(page, 'section#outcome #is-error', 'a call missing its required "text" (an error result)');
  return {};
});

step('playground-calls-as-another-key', async () => {
  await go(page, at('/playground?tool=web__shout'));
  await need(page, `form#playground select[name=as] option[value="${plan.userName}"]`, `key ${plan.userName} in select[name=as]`);
  await page.selectOption('form#playground select[name=as]', plan.userName);
  await page.fill('form#playground input[name="arg.text"]', 'as a user');
  await submit(page, 'form#playground', 'button#call');
  const result = await text(page, 'section#outcome pre#result');
  check(result.includes('AS A USER!'), `pre#result reads ${JSON.stringify(result)}`, 'pre#result');
  return { result };
});

step('live-calls', async () => {
  const filter = `/calls?caller=${encodeURIComponent(plan.userName)}`;
  await openPage(page, filter, 'calls');
  await need(page, 'table#calls');
  const rows = `table#calls tbody tr.call[data-caller="${plan.userName}"][data-tool*="shout"]`;
  const before = await page.locator(rows).count();
  check(before >= 1, `the playground's call as ${plan.userName} is not among the live calls (${rows})`, rows);
  const others = await page.locator(`table#calls tbody tr.call:not([data-caller="${plan.userName}"])`).count();
  check(others === 0, `?caller=${plan.userName} still lists ${others} call(s) of other callers`);
  const client = callAs(plan.userKey, 'web__shout', ['--arg', 'text=live']);
  const out = await client.done;
  check(out.code === 0, `manifold call web__shout exited ${out.code}: ${out.stderr}`);
  try {
    await page.waitForFunction(([sel, n]) => document.querySelectorAll(sel).length > n, [rows, before], { timeout: LIVE_DEADLINE_MS, polling: 100 });
  } catch {
    fail(`a call made by a client did not appear live in table#calls (still ${before} rows matching ${rows})`, rows);
  }
  const row = page.locator(rows).last();
  const attrs = await row.evaluate((r) => ({ ...r.dataset }));
  check(attrs.server === 'web' && attrs.outcome, `the new row's data-server/data-outcome are ${JSON.stringify(attrs)}`, rows);
  await go(page, at('/calls'));
  await shot(page, 'calls.png');
  return { row: attrs };
});

/** Waits for the one pending approval of `tool` on the approvals page, live; its id. */
async function pendingApproval(tool) {
  const rows = 'table#pending tr[data-approval]';
  try {
    await page.waitForFunction(
      ([sel, t]) => [...document.querySelectorAll(sel)].some((r) => r.querySelector('td.tool')?.textContent.includes(t)),
      [rows, tool],
      { timeout: LIVE_DEADLINE_MS, polling: 100 },
    );
  } catch {
    fail(`no pending approval of ${tool} appeared live in table#pending`, rows);
  }
  return page.locator(rows).evaluateAll(
    (rs, t) => rs.find((r) => r.querySelector('td.tool')?.textContent.includes(t)).dataset.approval,
    tool,
  );
}

/** The state table#history gives approval `id` (reloading the page until it is listed). */
async function historyState(id) {
  return pollPage(page, at('/approvals'), async (p) => {
    const cell = p.locator(`table#history tr[data-approval="${id}"] td.state`);
    return (await cell.count()) ? (await cell.first().textContent()).trim() : null;
  }, `approval ${id} never appeared in table#history`);
}

step('a-held-call-is-approved-and-its-client-gets-the-result', async () => {
  await openPage(page, '/approvals', 'approvals');
  const client = callAs(plan.userKey, 'py__add', ['--json', '{"a": 2, "b": 3}']);
  const id = await pendingApproval('py__add');
  const row = `table#pending tr[data-approval="${id}"]`;
  const caller = await text(page, `${row} td.caller`);
  check(caller.includes(plan.userName), `${row} td.caller reads ${JSON.stringify(caller)}`, `${row} td.caller`);
  await need(page, `${row} td.window`);
  const args = await text(page, `${row} pre.arguments`);
  check(/"a"\s*:\s*2/.test(args) && /"b"\s*:\s*3/.test(args), `${row} pre.arguments reads ${JSON.stringify(args)}`, `${row} pre.arguments`);
  await need(page, `${row} form.deny input[name=reason]`);
  await shot(page, 'approvals.png');
  await submit(page, `${row} form.approve`);
  const flash = await expectFlash(page, 'approving the held call');
  const out = await client.done;
  check(out.code === 0, `the held client exited ${out.code} after the approval: ${out.stdout}${out.stderr}`);
  check(out.stdout.trim() === '5', `the held client printed ${JSON.stringify(out.stdout)}, expected 5`);
  const state = await historyState(id);
  check(/^(approved|used)$/.test(state), `table#history says ${state} for the approved call`, `table#history tr[data-approval="${id}"] td.state`);
  await absent(page, row, 'the answered question still pending');
  return { id, flash, client: out.stdout.trim(), state };
});

step('a-held-call-is-denied-and-its-client-hears-why', async () => {
  await go(page, at('/approvals'));
  const client = callAs(plan.userKey, 'py__echo', ['--arg', 'message=deny me']);
  const id = await pendingApproval('py__echo');
  const row = `table#pending tr[data-approval="${id}"]`;
  const reason = 'denied from the browser test';
  await page.fill(`${row} form.deny input[name=reason]`, reason);
  await submit(page, `${row} form.deny`);
  const flash = await expectFlash(page, 'denying the held call');
  const out = await client.done;
  const said = out.stdout + out.stderr;
  check(out.code !== 0, `the denied client exited 0: ${said}`);
  check(said.includes(reason) && /reject|den(y|ied)/i.test(said), `the denied client's error does not give the denial and its reason: ${said}`);
  const state = await historyState(id);
  check(state === 'rejected', `table#history says ${state} for the denied call`, `table#history tr[data-approval="${id}"] td.state`);
  return { id, flash, client: said.trim().slice(0, 300), state };
});

step('audit', async () => {
  await openPage(page, '/audit', 'audit');
  const count = await page.locator('table#audit tr[data-seq]').count();
  check(count > 0, 'table#audit has no tr[data-seq]', 'table#audit tr[data-seq]');
  await go(page, at(`/audit?caller=${encodeURIComponent(plan.userName)}`));
  const mine = await page.locator('table#audit tr[data-seq]').allTextContents();
  check(mine.length > 0 && mine.every((r) => r.includes(plan.userName)), `?caller=${plan.userName} lists ${mine.length} rows, not all of them ${plan.userName}'s`, 'table#audit tr[data-seq]');
  const exportLink = await need(page, 'a#export');
  const exported = await page.request.get(new URL(await exportLink.getAttribute('href'), page.url()).href);
  check(exported.status() === 200, `a#export answered ${exported.status()}`, 'a#export');
  const lines = (await exported.text()).split('\n').filter((l) => l.trim());
  check(lines.length > 0, 'the export is empty', 'a#export');
  for (const line of lines) {
    try {
      JSON.parse(line);
    } catch {
      fail(`the export has a line that is not JSON: ${line.slice(0, 200)}`, 'a#export');
    }
  }
  const record = page.locator('table#audit tr[data-seq] a.record').first();
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), record.click()]);
  await need(page, 'main#page-audit-record', 'following a.record');
  const shown = await text(page, 'pre#record');
  check(shown.includes(plan.userName), `pre#record does not name the caller: ${shown.slice(0, 300)}`, 'pre#record');
  await go(page, at('/audit'));
  await submit(page, 'form#verify');
  const verdict = await text(page, '#verify-result');
  check(/intact/i.test(verdict), `#verify-result reads ${JSON.stringify(verdict)}`, '#verify-result');
  await shot(page, 'audit.png');
  return { rows: count, exported: lines.length, verdict };
});

async function authoredRow(tool) {
  const row = `table#authored tr[data-tool="${tool}"]`;
  await need(page, row, 'the authored tools');
  return { state: await text(page, `${row} td.state`), version: await text(page, `${row} td.version`) };
}

step('authored-tools', async () => {
  const tool = plan.authoredTool;
  await openPage(page, '/authored', 'authored');
  const listed = await authoredRow(tool);
  check(listed.state === 'enabled' && listed.version === '2', `${tool} is listed as ${JSON.stringify(listed)}, expected enabled, version 2`);
  await shot(page, 'authored.png');
  await openPage(page, `/authored/${tool}`, 'authored-tool');
  await need(page, 'table#versions tr[data-version="1"]');
  await need(page, 'table#versions tr[data-version="2"]');
  const diff = await text(page, 'pre#diff');
  check(diff.includes('and says so'), `pre#diff does not show the update: ${diff.slice(0, 300)}`, 'pre#diff');

  await submit(page, 'form#disable');
  await expectFlash(page, `disabling ${tool}`);
  await go(page, at('/authored'));
  check((await authoredRow(tool)).state === 'disabled', `${tool} is not listed as disabled after form#disable`);
  const refused = await callAs(plan.adminKey, tool, ['--arg', 'text=a b c']).done;
  check(refused.code !== 0, `a client still called the disabled ${tool}: ${refused.stdout}`);

  await go(page, at(`/authored/${tool}`));
  await submit(page, 'form#enable');
  await expectFlash(page, `enabling ${tool}`);
  const called = await callAs(plan.adminKey, tool, ['--arg', 'text=a b c']).done;
  check(called.code === 0 && called.stdout.includes('3'), `calling the re-enabled ${tool} gave ${called.code}: ${called.stdout}${called.stderr}`);

  // Disabling and enabling are versions of their own; the rollback is the next one.
  await go(page, at('/authored'));
  const before = Number.parseInt((await authoredRow(tool)).version, 10);
  await go(page, at(`/authored/${tool}`));
  await submit(page, 'form.rollback[data-version="1"]');
  await expectFlash(page, `rolling ${tool} back to version 1`);
  await go(page, at(`/authored/${tool}`));
  await need(page, `table#versions tr[data-version="${before + 1}"]`, `the rollback as version ${before + 1}`);
  await go(page, at('/authored'));
  const after = await authoredRow(tool);
  check(after.state === 'enabled' && after.version === String(before + 1), `${tool} is listed as ${JSON.stringify(after)} after rolling back from version ${before}`);
  const description = await text(page, `table#authored tr[data-tool="${tool}"] td.description`);
  check(!description.includes('and says so'), `the rollback to version 1 kept version 2's description: ${description}`, 'td.description');
  return { listed, after };
});

const TEMP_KEY = 'browser-admin';
let second; // a second browser, signed in with the key that is revoked below
let secondKeys; // its create-key form, as it was before the revocation

step('keys-create-and-sign-in-with-the-new-key', async () => {
  await openPage(page, '/keys', 'keys');
  for (const name of [plan.adminName, plan.userName]) {
    const state = await text(page, `table#keys tr[data-key="${name}"] td.state`);
    check(state === 'active', `key ${name} reads ${state}`, `table#keys tr[data-key="${name}"] td.state`);
  }
  await page.fill('form#create-key input[name=name]', TEMP_KEY);
  await page.fill('form#create-key input[name=scopes]', 'admin');
  await page.fill('form#create-key input[name=groups]', 'ops');
  await submit(page, 'form#create-key');
  const key = await text(page, 'code#new-key');
  check(/^mfk_[0-9a-f]{16}_[0-9a-f]{64}$/.test(key), `code#new-key reads ${JSON.stringify(key)}`, 'code#new-key');
  const state = await text(page, `table#keys tr[data-key="${TEMP_KEY}"] td.state`);
  check(state === 'active', `the new key reads ${state}`);
  await shot(page, 'keys.png');
  await go(page, at('/keys'));
  const again = await page.locator('code#new-key').count();
  check(again === 0, 'the new key is shown again on a later visit', 'code#new-key');
  const body = await page.content();
  check(!body.includes(key), 'the keys page shows the new key\'s secret on a later visit');

  second = await browser.newContext();
  const other = await second.newPage();
  const response = await signIn(other, key);
  check(new URL(other.url()).pathname === '/ui/' && response.status() === 200, `signing in with the new key ended ${response.status()} at ${other.url()}`);
  await go(other, at('/keys'));
  secondKeys = await formOf(other, 'form#create-key');
  return { key: `${key.slice(0, 21)}...` };
});

step('keys-revoke-ends-the-sessions-of-that-key', async () => {
  await go(page, at('/keys'));
  await submit(page, `form.revoke[data-key="${TEMP_KEY}"]`);
  await expectFlash(page, `revoking ${TEMP_KEY}`);
  const state = await text(page, `table#keys tr[data-key="${TEMP_KEY}"] td.state`);
  check(state === 'revoked', `the revoked key reads ${state}`);
  const other = second.pages()[0];
  await pollPage(other, at('/'), async (p) => new URL(p.url()).pathname === '/ui/login',
    'a session signed in with the revoked key still opens /ui/');
  const posted = await second.request.post(secondKeys.action, {
    form: { ...secondKeys.fields, name: 'ghost', scopes: 'admin' },
    headers: { Origin: origin },
    maxRedirects: 0,
  });
  check(posted.status() === 401, `a POST with the revoked key's cookie answered ${posted.status()}, expected 401`);
  await second.close();
  return { state, post: posted.status() };
});

step('csrf-and-foreign-origin-are-refused', async () => {
  await go(page, at('/keys'));
  const form = await formOf(page, 'form#create-key');
  check(form.method === 'post' && form.fields.csrf, 'form#create-key is not a POST with a csrf field', 'form#create-key');
  const { csrf, ...rest } = form.fields;
  const post = (fields, headers) => page.request.post(form.action, { form: fields, headers, maxRedirects: 0 });
  const noToken = await post({ ...rest, name: 'csrf-probe', scopes: 'admin' }, { Origin: origin });
  check(noToken.status() === 403, `a POST without the csrf field answered ${noToken.status()}, expected 403`);
  const wrongToken = await post({ ...rest, csrf: `${csrf}x`, name: 'csrf-probe', scopes: 'admin' }, { Origin: origin });
  check(wrongToken.status() === 403, `a POST with a wrong csrf token answered ${wrongToken.status()}, expected 403`);
  const foreign = await post({ ...form.fields, name: 'csrf-probe', scopes: 'admin' }, { Origin: FOREIGN_ORIGIN });
  check(foreign.status() === 403, `a POST from Origin ${FOREIGN_ORIGIN} answered ${foreign.status()}, expected 403`);
  // The same request with the token and the dashboard's own origin goes through: the refusals above
  // were for the token and the origin, nothing else.
  const control = await post({ ...form.fields, name: 'csrf-control', scopes: '' }, { Origin: origin });
  check(control.status() < 400, `the same POST with its token and origin answered ${control.status()}`);
  await go(page, at('/keys'));
  await absent(page, 'table#keys tr[data-key="csrf-probe"]', 'a key created by a refused request');
  await need(page, 'table#keys tr[data-key="csrf-control"]', 'the key the accepted request created');
  return { noToken: noToken.status(), wrongToken: wrongToken.status(), foreign: foreign.status(), control: control.status() };
});

step('no-session-is-sent-to-sign-in', async () => {
  const form = await formOf(page, 'form#create-key');
  const stranger = await browser.newContext();
  const get = await stranger.request.get(at('/catalog'), { maxRedirects: 0 });
  check(get.status() === 303, `GET /ui/catalog without a session answered ${get.status()}, expected 303`);
  const location = new URL(get.headers().location ?? '', ui).pathname;
  check(location === '/ui/login', `GET /ui/catalog without a session redirects to ${location}`);
  const post = await stranger.request.post(form.action, { form: { ...form.fields, name: 'stranger' }, headers: { Origin: origin }, maxRedirects: 0 });
  check(post.status() === 401, `a POST without a session answered ${post.status()}, expected 401`);
  const forged = await stranger.request.get(at('/'), { headers: { Cookie: 'manifold_ui=forged' }, maxRedirects: 0 });
  check(forged.status() === 303, `GET /ui/ with an invented cookie answered ${forged.status()}, expected 303`);
  await stranger.close();
  return { get: get.status(), post: post.status(), forged: forged.status() };
});

step('config-check-and-apply', async () => {
  await openPage(page, '/config', 'config');
  const running = await text(page, 'pre#running-config');
  check(running.includes('web'), `pre#running-config does not show the servers: ${running.slice(0, 300)}`, 'pre#running-config');
  check(!running.includes(plan.secret), 'pre#running-config shows a secret of the configuration', 'pre#running-config');
  const onDisk = fs.readFileSync(plan.configPath, 'utf8');
  const prefilled = await page.locator('form#edit-config textarea[name=config]').inputValue();
  // The file as it is, except its one literal secret, which the page replaces by a mark of its own.
  const [head, tail] = onDisk.split(plan.secret);
  const shownText = prefilled.replace(/\r\n/g, '\n');
  check(!shownText.includes(plan.secret), 'textarea[name=config] shows a secret of the file', 'textarea[name=config]');
  check(shownText.startsWith(head) && shownText.trimEnd().endsWith(tail.trimEnd()), 'textarea[name=config] is not the file as it is on disk (but for its secret)', 'textarea[name=config]');
  const mark = shownText.slice(head.length, shownText.lastIndexOf(tail.trimEnd()));

  // Applying the page as shown would write the mark over the secret: refused, the file untouched.
  await page.fill('form#edit-config textarea[name=config]', `${shownText.trimEnd()}\n\n${plan.extraServer.trim()}\n`);
  await submit(page, 'form#edit-config', 'button[name=action][value=apply]');
  const markRefused = (await page.locator('p.error, ul#check-errors li').allTextContents()).join(' | ');
  check(markRefused, 'applying a text that still holds the secret\'s mark was not refused', 'p.error, ul#check-errors li');
  await absent(page, 'p#applied', 'applying a text that still holds the secret\'s mark');
  check(fs.readFileSync(plan.configPath, 'utf8') === onDisk, 'applying a text holding the secret\'s mark rewrote the file');
  await go(page, at('/config'));

  await page.fill('form#edit-config textarea[name=config]', `${onDisk}\n[servers.broken]\ncommand = 5\n`);
  await submit(page, 'form#edit-config', 'button[name=action][value=check]');
  const errors = await page.locator('ul#check-errors li').allTextContents();
  check(errors.length > 0, 'checking a bad configuration listed no ul#check-errors li', 'ul#check-errors li');
  check(errors.every((e) => /line\s*\d+.*col(umn)?\s*\d+|\d+:\d+/is.test(e)), `a check error gives no line and column: ${errors.join(' | ')}`, 'ul#check-errors li');
  check(fs.readFileSync(plan.configPath, 'utf8') === onDisk, 'checking rewrote the configuration file');

  const changed = `${onDisk.trimEnd()}\n\n${plan.extraServer.trim()}\n`;
  await go(page, at('/config'));
  await page.fill('form#edit-config textarea[name=config]', changed);
  await submit(page, 'form#edit-config', 'button[name=action][value=check]');
  await absent(page, 'ul#check-errors li', 'checking a good configuration');
  const diff = await text(page, 'pre#config-diff');
  check(diff.includes('[servers.extra]'), `pre#config-diff does not show the added server: ${diff.slice(0, 400)}`, 'pre#config-diff');
  check(!diff.includes(plan.secret), 'pre#config-diff shows a secret of the file', 'pre#config-diff');
  check(fs.readFileSync(plan.configPath, 'utf8') === onDisk, 'checking rewrote the configuration file');
  await shot(page, 'config.png');

  await page.fill('form#edit-config textarea[name=config]', changed);
  await submit(page, 'form#edit-config', 'button[name=action][value=apply]');
  const applied = await text(page, 'p#applied');
  const written = fs.readFileSync(plan.configPath, 'utf8');
  check(written.includes('[servers.extra]'), 'applying did not rewrite the configuration file');
  await pollPage(page, at('/'), async (p) => {
    const cell = p.locator('tr[data-server="extra"] td.state');
    return (await cell.count()) && (await cell.first().textContent()).trim() === 'up';
  }, 'the server added by the configuration change is not up on the overview');
  return { mark, markRefused, errors, applied };
});

step('sign-out', async () => {
  await go(page, at('/'));
  await submit(page, 'form#signout');
  check(new URL(page.url()).pathname === '/ui/login', `signing out landed on ${page.url()}`);
  await go(page, at('/'));
  check(new URL(page.url()).pathname === '/ui/login', `after signing out /ui/ opened ${page.url()}`);
  return {};
});

// Only some steps, by name (comma-separated MANIFOLD_DASHBOARD_STEPS), for working on one part; sign-in
// always runs first since every other step needs the session.
const only = (process.env.MANIFOLD_DASHBOARD_STEPS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
let failed = false;
for (const [name, body] of steps) {
  if (only.length && name !== 'sign-in' && !only.includes(name)) continue;
  const started = Date.now();
  try {
    const detail = await body();
    emit({ step: name, ok: true, ms: Date.now() - started, ...(detail && Object.keys(detail).length ? { detail } : {}) });
  } catch (e) {
    emit({
      step: name,
      ok: false,
      error: e instanceof Failure ? e.message : String(e?.stack ?? e),
      selector: e?.selector,
      url: current.url(),
      html: await excerpt(current),
    });
    failed = true;
    break;
  }
}
await browser.close().catch(() => {});
process.exit(failed ? 1 : 0);
