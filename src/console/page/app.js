// The OpenComms console page (operator.md "The console"). Plain ES module, no build, no CDN. Every view is
// re-read from the API on each SSE `refresh` (the page never polls); every peer-written string is
// put in the page as text, never as markup. The machine diagrams are SVG the server draws; the
// current state of the selected envelope or recipient gets the `current` class.

/** How the tabs name the hosts the server lists (an unknown one shows its id). */
const HOST_LABELS = {
  opencode: 'OpenCode',
  'claude-code': 'Claude Code',
  codex: 'Codex',
  'claude-desktop': 'Claude Desktop',
  chatgpt: 'ChatGPT',
};
const SUMMARY_TEMPLATE = 'Goal: \nDone: \nOpen questions: \nNext steps: ';
/** A note stays long enough to read two lines, then gets out of the way. */
const TOAST_MS = 6000;

const ui = {
  channels: { live: [], archived: [] },
  selected: decodeURIComponent(location.hash.replace(/^#\/channel\//, '')) || null,
  detail: null,
  deliveries: null,
  machines: null,
  envelope: null,
  recipient: null,
  host: 'opencode',
  join: null,
  /** The selected live channel's cost report (GET /api/usage?channel=): `report` whole, `channel` its one channel. */
  usage: null,
  /** The operator's message being written, kept across live re-renders: `to` is a role or '*'. */
  compose: { to: '*', text: '' },
};

// ---- small DOM helpers ----------------------------------------------------------------------

/** `h('tag.class', {attr: v, onclick: fn}, ...children)`: children are nodes or text. */
function h(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split('.');
  const el = document.createElement(tag);
  if (classes.length) el.className = classes.join(' ');
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat())
    if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
const $ = (id) => document.getElementById(id);
/** A table in a box that scrolls sideways on a narrow window instead of overflowing the page. */
const scroll = (...args) => h('div.scroll', {}, h(...args));

function toast(message, kind = 'error') {
  const t = $('toast');
  t.textContent = message;
  t.className = `toast ${kind}`;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), TOAST_MS);
}

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let json;
  try {
    json = await res.json();
  } catch {
    json = { ok: false, message: `${method} ${path}: HTTP ${res.status}` };
  }
  return json;
}

/** An action: on refusal the message (it says what to do) is shown; on success, a note. */
async function act(method, path, body, done) {
  const r = await api(method, path, body);
  if (!r.ok) {
    toast(r.message);
    return null;
  }
  if (done) toast(done(r), 'ok');
  return r;
}

const clock = (ms) => `${new Date(ms).toLocaleTimeString([], { hour12: false })}.${String(ms % 1000).padStart(3, '0')}`;
const secs = (ms) =>
  ms < 10_000
    ? `${(ms / 1000).toFixed(1)} s`
    : ms < 3_600_000
      ? `${Math.round(ms / 1000)} s`
      : `${(ms / 3_600_000).toFixed(1)} h`;
const countMessages = (n) => `${n} message${n === 1 ? '' : 's'}`;
const shortId = (id) => (id.length > 14 ? `${id.slice(0, 12)}…` : id);

// ---- loading ---------------------------------------------------------------------------------

async function loadAll() {
  const list = await api('GET', '/api/channels');
  if (list.ok) ui.channels = list.data;
  else toast(list.message);
  if (ui.selected) await loadDetail();
  render();
}

async function loadDetail() {
  const name = encodeURIComponent(ui.selected);
  const d = await api('GET', `/api/channels/${name}/members`);
  if (!d.ok) {
    ui.detail = null;
    ui.deliveries = null;
    ui.selected = null;
    history.replaceState(null, '', '#');
    return;
  }
  ui.detail = d.data;
  if (d.data.kind === 'live') {
    const [v, j, u] = await Promise.all([
      api('GET', `/api/channels/${name}/deliveries`),
      api('GET', `/api/channels/${name}/join-command?host=${ui.host}`),
      api('GET', `/api/usage?channel=${name}`),
    ]);
    ui.deliveries = v.ok ? v.data : null;
    ui.join = j.ok ? j.data : null;
    ui.usage = u.ok && u.data.channels[0] ? { report: u.data, channel: u.data.channels[0] } : null;
  } else {
    ui.deliveries = null;
    ui.join = null;
    ui.usage = null;
  }
}

/** SSE refreshes arrive in bursts (one per file event); one reload runs at a time, plus one more
 *  if another refresh came meanwhile. */
let loading = null;
let again = false;
function refresh() {
  if (loading) {
    again = true;
    return loading;
  }
  loading = (async () => {
    do {
      again = false;
      await loadAll();
    } while (again);
    loading = null;
  })();
  return loading;
}

function select(name) {
  ui.selected = name;
  ui.envelope = null;
  ui.recipient = null;
  history.replaceState(null, '', name ? `#/channel/${encodeURIComponent(name)}` : '#');
  refresh();
}

// ---- rendering -------------------------------------------------------------------------------

function badge(text, kind = '') {
  return h(`span.badge${kind ? `.${kind}` : ''}`, {}, text);
}

function card(s, archived) {
  const count = archived ? countMessages(s.message_count) : `${s.agents.length}/${s.max_members} agents`;
  const name = s.name;
  const current = ui.selected === name && (ui.detail?.kind === 'archived') === archived;
  return h(
    'li',
    {},
    h(
      'button.card',
      {
        type: 'button',
        'aria-current': current ? 'true' : undefined,
        dataset: { channel: name },
        onclick: () => select(name),
      },
      h(
        'span.card-head',
        {},
        h('strong', {}, name),
        archived
          ? badge(`saved ${new Date(s.saved_at).toISOString().slice(0, 10)}`, 'saved')
          : badge(s.lifecycle, 'active'),
        s.paused ? badge('paused', 'paused') : null,
      ),
      h('span.card-count', {}, count),
      h('span.card-desc', {}, s.description ?? 'No description yet'),
    ),
  );
}

function renderChannels() {
  const live = $('live-list');
  const saved = $('saved-list');
  live.replaceChildren(
    ...(ui.channels.live.length
      ? ui.channels.live.map((s) => card(s, false))
      : [h('li.muted', {}, 'No live channels.')]),
  );
  saved.replaceChildren(
    ...(ui.channels.archived.length
      ? ui.channels.archived.map((s) => card(s, true))
      : [h('li.muted', {}, 'No saved channels.')]),
  );
}

/** The agent's computer (short id, hostname when known) and its process's lease; every string is
 *  set as text. A saved channel's agents have none. */
function machineCell(a) {
  if (!a.lease) return h('td.muted', {}, '—');
  const id = a.machine ? a.machine.slice(0, 8) : 'unknown';
  const label = `${id}${a.machine_name ? ` (${a.machine_name})` : ''}${a.this_machine ? ' · this computer' : ''}`;
  return h(
    'td',
    {},
    h('span.mono', { title: a.machine ?? 'recorded before computer ids' }, label),
    ' ',
    h(`span.lease.${a.lease === 'n/a' ? 'na' : a.lease}`, { title: `lease: ${a.lease}` }, `lease ${a.lease}`),
  );
}

// ---- wakes and their cost (operator.md "Wakes and their cost") ------------------------------------

const HOLD_LABELS = { loop: 'loop guard', wake_budget: 'wake budget' };
const num = (n) => n.toLocaleString('en-US');
const utc = (ms) => `${new Date(ms).toISOString().slice(11, 19)} UTC`;
/** One window of the ledger in a cell: wakes, messages and the token estimate (labelled). */
const costShort = (c) =>
  `${num(c.wakes)} wake${c.wakes === 1 ? '' : 's'} · ${num(c.messages)} msg · ~${num(c.tokens_estimate)} tok`;
/** The same window in full, for a tooltip: wakes by route, reads, held turns, characters. */
function costLong(c) {
  const routes = Object.entries(c.routes)
    .filter(([r]) => r !== 'pull')
    .map(([r, k]) => `${r} ${num(k)}`);
  return [
    `${num(c.wakes)} wakes${routes.length ? ` (${routes.join(', ')})` : ''}`,
    c.routes.pull ? `${num(c.routes.pull)} reads (pull)` : null,
    `${num(c.held)} held`,
    `${num(c.messages)} messages`,
    `${num(c.size)} characters`,
    `~${num(c.tokens_estimate)} tokens (estimate: ${ui.usage?.report.token_estimate.rule ?? 'ceil(size / 4)'})`,
  ]
    .filter(Boolean)
    .join(', ');
}
const budgetShort = (b) => (b.budget === null ? 'no budget' : `${b.used}/${b.budget} this hour`);

/** The member's entry of the selected channel's cost report, or null (a saved channel, or not loaded). */
const usageOf = (a) => ui.usage?.channel.members.find((m) => m.session_id === a.session_id) ?? null;

/** Its wake line: held (by what, since when, a Release button) or going, with its wake budget use. */
function wakeCell(a, live) {
  const u = usageOf(a);
  if (!u) return h('td.muted', {}, '—');
  const budget = h(
    'span.budget.muted',
    { title: 'wake budget: wakes started in the last hour' },
    budgetShort(u.wake_budget),
  );
  if (!u.hold.held_by) return h('td', {}, h('span.wake.go', {}, 'wakes go'), ' ', budget);
  const label = HOLD_LABELS[u.hold.held_by] ?? u.hold.held_by;
  const since = u.hold.held_since === null ? '' : ` since ${utc(u.hold.held_since)}`;
  const pending =
    u.hold.pending === null
      ? ''
      : `; ${u.hold.pending} message(s) wait, readable by pull and handed over at its next turn`;
  const frees = u.wake_budget.next_free_at ?? ui.usage.channel.wake_budget.next_free_at;
  const ends =
    u.hold.held_by !== 'wake_budget'
      ? ''
      : frees === null
        ? ' It ends as the hour frees a slot, or when the budget grows (opencomms channel budget).'
        : ` A slot frees at ${utc(frees)}; the budget can also grow (opencomms channel budget).`;
  return h(
    'td',
    {},
    h(
      'span.wake.held',
      {
        title: `Held by the ${label}${since}${pending}.${ends}`,
        tabindex: 0,
        'aria-label': `wakes held by the ${label}${since}`,
      },
      `held · ${label}`,
    ),
    ' ',
    budget,
    // The loop guard's hold is the operator's to release; a budget's ends as the hour frees a slot
    // or the budget grows (`opencomms channel budget`).
    live && u.hold.held_by === 'loop'
      ? h(
          'button.small',
          { type: 'button', onclick: () => releaseWakes(a), 'aria-label': `Release the wakes of ${a.role}` },
          'Release',
        )
      : null,
  );
}

/** What it cost in the last hour; the day and the total in the tooltip. */
function costCell(a) {
  const u = usageOf(a);
  if (!u) return h('td.muted', {}, '—');
  const tip = `Last hour: ${costLong(u.usage.hour)}\nLast day: ${costLong(u.usage.day)}\nSince the channel began: ${costLong(u.usage.total)}`;
  return h('td', {}, h('span.cost', { title: tip, tabindex: 0 }, costShort(u.usage.hour)));
}

/** The selected channel's windows, its members' and the channel's, and its wake budget. */
function usagePanel() {
  const c = ui.usage.channel;
  const r = ui.usage.report;
  const held = c.members.some((m) => m.hold.held_by === 'loop');
  const row = (label, u, hold) =>
    h(
      'tr',
      {},
      h('td', {}, label),
      h('td', {}, hold),
      ...['hour', 'day', 'total'].map((w) => h('td', { title: costLong(u[w]) }, costShort(u[w]))),
    );
  return h(
    'section.panel',
    { 'aria-labelledby': 'usage-title' },
    h(
      'h3',
      { id: 'usage-title' },
      'Wakes and cost ',
      h('span.muted', {}, `wake budget ${budgetShort(c.wake_budget)} (channel)`),
    ),
    scroll(
      'table.usage',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'Member'),
          h('th', {}, 'Wakes'),
          h('th', {}, `Last hour (since ${utc(r.windows.hour.since)})`),
          h('th', {}, 'Last day'),
          h('th', {}, 'Since the channel began'),
        ),
      ),
      h(
        'tbody',
        {},
        c.members.map((m) =>
          row(
            m.role ?? `${shortId(m.session_id)} (left)`,
            m.usage,
            m.hold.held_by ? `held · ${HOLD_LABELS[m.hold.held_by] ?? m.hold.held_by}` : 'go',
          ),
        ),
        row(h('strong', {}, 'Channel'), c.usage, ''),
      ),
    ),
    h(
      'p.muted',
      {},
      `Tokens are an estimate: ${r.token_estimate.rule} of the characters shown to the model. `,
      held
        ? h(
            'button.small',
            { type: 'button', onclick: () => releaseWakes(null) },
            'Release every wake the loop guard holds',
          )
        : null,
    ),
  );
}

function agentRow(a, live, help) {
  return h(
    'tr',
    {},
    h('td', {}, a.role),
    h('td.mono', { title: a.session_id }, shortId(a.session_id)),
    h('td', {}, a.host),
    machineCell(a),
    h('td', {}, a.delivery_mode),
    wakeCell(a, live),
    costCell(a),
    h(
      'td',
      {},
      h(
        `span.agent.${a.state.toLowerCase()}`,
        { title: help, tabindex: 0, 'aria-label': `${a.state}. ${help}` },
        a.state,
      ),
    ),
    live
      ? h(
          'td',
          {},
          h(
            'button.small',
            { type: 'button', onclick: () => removeAgent(a), 'aria-label': `Remove ${a.role}` },
            'Remove',
          ),
        )
      : h('td'),
  );
}

function agentsTable(d) {
  const live = d.kind === 'live';
  if (!d.agents.length) return h('p.muted', {}, 'No agents yet. Give one of the join commands below to an agent.');
  return scroll(
    'table.agents',
    {},
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', {}, 'Role'),
        h('th', {}, 'Id'),
        h('th', {}, 'Host'),
        h('th', {}, 'Computer'),
        h('th', {}, 'Delivery'),
        h(
          'th',
          {},
          h('abbr', { title: 'Whether OpenComms starts its turns for its mail, and its wake budget use' }, 'Wakes'),
        ),
        h(
          'th',
          {},
          h('abbr', { title: 'Last hour; the day and the total in the tooltip. Tokens are an estimate.' }, 'Cost'),
        ),
        h('th', {}, h('abbr', { title: d.agent_state_help }, 'State')),
        h('th', {}, ''),
      ),
    ),
    h(
      'tbody',
      {},
      d.agents.map((a) => agentRow(a, live, d.agent_state_help)),
    ),
  );
}

/** The operator writes to the channel's agents (operator.md "Speaking to the agents"): framed like
 *  every message, sender Operator, every rule of a send applies; a refusal says what to do. */
function composePanel(d) {
  const live = d.agents.filter((a) => !a.stale);
  const options = [h('option', { value: '*' }, 'everyone'), ...live.map((a) => h('option', { value: a.role }, a.role))];
  const to = h(
    'select',
    { id: 'compose-to', 'aria-label': 'To', onchange: (e) => (ui.compose.to = e.target.value) },
    options,
  );
  to.value = live.some((a) => a.role === ui.compose.to) ? ui.compose.to : '*';
  const text = h('textarea', {
    id: 'compose-text',
    rows: 3,
    'aria-label': 'Message',
    placeholder: 'Write to the agents…',
    oninput: (e) => (ui.compose.text = e.target.value),
  });
  text.value = ui.compose.text;
  return h(
    'section.panel',
    { 'aria-labelledby': 'compose-title' },
    h('h3', { id: 'compose-title' }, 'Write to the agents'),
    h(
      'form.compose',
      { onsubmit: sendMessage },
      h('label', {}, 'To ', to),
      text,
      h('button', { type: 'submit', id: 'compose-send' }, 'Send'),
    ),
  );
}

async function sendMessage(e) {
  e.preventDefault();
  const content = ui.compose.text;
  const body = ui.compose.to === '*' ? { content, broadcast: true } : { content, to: ui.compose.to };
  const r = await act('POST', `/api/channels/${encodeURIComponent(ui.selected)}/messages`, body, (x) => x.message);
  if (r) ui.compose.text = '';
  $('compose-text').value = ui.compose.text;
}

function joinPanel(d) {
  const tabs = h(
    'div.tabs',
    { role: 'tablist', 'aria-label': 'Host' },
    (ui.join?.hosts ?? [ui.host]).map((id) =>
      h(
        'button.tab',
        {
          type: 'button',
          role: 'tab',
          'aria-selected': ui.host === id ? 'true' : 'false',
          onclick: async () => {
            ui.host = id;
            await loadDetail();
            render();
            document.querySelector(`.tab[data-host="${id}"]`)?.focus();
          },
          dataset: { host: id },
        },
        HOST_LABELS[id] ?? id,
      ),
    ),
  );
  const j = ui.join;
  return h(
    'section.panel',
    { 'aria-labelledby': 'join-title' },
    h('h3', { id: 'join-title' }, 'Join command'),
    tabs,
    j ? h('p.muted', {}, `Run ${j.where}:`) : null,
    j
      ? h(
          'div.copyline',
          {},
          h('code', { id: 'join-code' }, j.command),
          h('button.small', { type: 'button', onclick: () => copy(j.command) }, 'Copy'),
        )
      : h('p.muted', {}, `No join command for "${d.name}".`),
  );
}

async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast('Copied.', 'ok');
  } catch {
    const r = document.createRange();
    r.selectNodeContents($('join-code'));
    getSelection().removeAllRanges();
    getSelection().addRange(r);
    toast('Selected: press Ctrl+C to copy.', 'ok');
  }
}

/** A table of selectable rows: `row(item)` gives {selected, choose, label, dataset, cells}. */
function selectTable(label, headers, items, row) {
  return scroll(
    'table.machine-table',
    { 'aria-label': label },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headers.map((t) => h('th', {}, t)),
      ),
    ),
    h(
      'tbody',
      {},
      items.map((item) => selectableRow(row(item))),
    ),
  );
}

function selectableRow({ selected, choose, label, dataset, cells }) {
  const pick = () => {
    choose();
    renderDetail();
  };
  return h(
    'tr.selectable',
    {
      tabindex: 0,
      'aria-selected': selected ? 'true' : 'false',
      'aria-label': label,
      dataset,
      onclick: pick,
      onkeydown: (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          pick();
        }
      },
    },
    ...cells,
  );
}

function recipientsTable(v) {
  if (!v.recipients.length) return h('p.muted', {}, 'No recipients yet.');
  return selectTable(
    'Recipients',
    ['Recipient', 'Machine state', 'Pending', 'In flight', 'Cooldown until'],
    v.recipients,
    (r) => ({
      selected: ui.recipient === r.session_id,
      choose: () => (ui.recipient = r.session_id),
      label: `recipient ${r.role}`,
      dataset: { recipient: r.session_id },
      cells: [
        h('td', {}, r.role, ' ', h('span.muted', {}, r.delivery_mode)),
        h('td', {}, h(`span.mstate.${r.machine_state}`, {}, r.state)),
        h('td.num', {}, r.pending),
        h('td.num', {}, r.in_flight),
        h('td', {}, r.cooldown_until && r.cooldown_until > v.now ? clock(r.cooldown_until) : '—'),
      ],
    }),
  );
}

function envelopesTable(v) {
  if (!v.envelopes.length) return h('p.muted', {}, 'No mail yet on this channel.');
  const headers = ['Envelope', 'From → to', 'Type', 'Status', 'Attempts', 'Age / window', 'Method', 'Held by'];
  return selectTable('Envelopes', headers, v.envelopes, (e) => ({
    selected: ui.envelope === e.message_id,
    choose: () => (ui.envelope = e.message_id),
    label: `envelope ${e.sender_role} to ${e.recipient_role}, ${e.delivery_status}`,
    dataset: { envelope: e.message_id, status: e.delivery_status },
    cells: [
      h('td.mono', { title: e.message_id }, shortId(e.message_id)),
      h('td', {}, `${e.sender_role} → ${e.recipient_role}`),
      h('td', {}, e.message_type),
      h('td', {}, h(`span.mstate.${e.delivery_status}`, {}, e.delivery_status)),
      h('td.num', {}, `${e.attempts}/${e.max_attempts}`),
      h('td', {}, `${secs(e.age_ms)} / ${e.window_ms === null ? 'no window' : secs(e.window_ms)}`),
      h('td', {}, e.delivery_method ?? '—'),
      h('td', {}, e.held_by ?? '—'),
    ],
  }));
}

function diagram(name, current, trail = []) {
  const box = h(
    `figure.diagram${name === 'envelope' || name === 'recipient' ? '.wide' : ''}`,
    { dataset: { machine: name } },
    h('figcaption', {}, name, current ? h('span.muted', {}, ` · ${current}`) : h('span.muted', {}, ' · select a row')),
  );
  const svgText = ui.machines?.[name];
  if (!svgText) return box;
  // Our own server's SVG (no peer text in it): parsed as markup, then marked up by state.
  const doc = new DOMParser().parseFromString(svgText, 'image/svg+xml');
  const svg = document.importNode(doc.documentElement, true);
  if (current) svg.querySelector(`[data-state="${CSS.escape(current)}"]`)?.classList.add('current');
  for (let i = 1; i < trail.length; i++)
    svg
      .querySelector(`.edge[data-from="${CSS.escape(trail[i - 1])}"][data-to="${CSS.escape(trail[i])}"]`)
      ?.classList.add('taken');
  box.append(svg);
  return box;
}

function receipt(e) {
  if (!e) return h('p.muted', {}, 'Select an envelope to see its receipt trail.');
  const t0 = e.transitions[0]?.at ?? e.timestamp;
  return h(
    'ol.trail',
    { 'aria-label': `Receipt of ${e.message_id}` },
    e.transitions.map((t, i) =>
      h(
        'li',
        {},
        h('span.mono', {}, clock(t.at)),
        ' ',
        h('span.muted', {}, `+${t.at - t0} ms`),
        ' ',
        h('strong', {}, t.event),
        ' → ',
        h(`span.mstate.${t.to}`, {}, t.to),
        i === e.transitions.length - 1 ? h('span.muted', {}, ' (now)') : null,
      ),
    ),
  );
}

function deliveryPanel(v) {
  const env = v.envelopes.find((e) => e.message_id === ui.envelope) ?? null;
  const rec = v.recipients.find((r) => r.session_id === ui.recipient) ?? null;
  const trail = env ? ['pending', ...env.transitions.slice(1).map((t) => t.to)] : [];
  return h(
    'section.panel',
    { 'aria-labelledby': 'delivery-title' },
    h('h3', { id: 'delivery-title' }, 'Delivery machines ', h('span.muted', {}, `channel ${v.channel_state}`)),
    h(
      'div.split',
      {},
      h('div', {}, h('h4', {}, 'Recipients'), recipientsTable(v)),
      h('div', {}, h('h4', {}, 'Receipt'), receipt(env)),
    ),
    h('h4', {}, 'Envelopes'),
    envelopesTable(v),
    h(
      'div.diagrams',
      {},
      diagram('envelope', env?.delivery_status ?? null, trail),
      diagram('recipient', rec?.machine_state ?? null),
      diagram('channel', v.channel_state),
      diagram('member', rec?.member_state ?? null),
      // The selected recipient's wake line (operator.md "Wakes and their cost").
      diagram(
        'wake',
        rec ? (ui.usage?.channel.members.find((m) => m.session_id === rec.session_id)?.hold.state ?? null) : null,
      ),
    ),
  );
}

// ---- Stately Inspector (docs/stately.md) -------------------------------------------------------

/** The channel shown in Stately Inspector: its window, the stream that feeds it, and the events
 *  waiting for the window to say it is ready. One at a time; another channel's click replaces it. */
let inspecting = null;

/** The console makes the inspection events (`@statelyai/inspect`'s own inspector, fed as `watch`
 *  is); the page relays them to the Stately window as the library's browser inspector does:
 *  postMessage, once the window posted `@statelyai.connected`. */
function inspectInStately(name) {
  const url = ui.inspectorUrl;
  if (!url) return toast('The console has not said where Stately Inspector is yet; try again.');
  // Opened in the click itself, so that no pop-up blocker stops it.
  const win = window.open(url, 'xstateinspector');
  if (!win) return toast('The browser blocked the Stately Inspector window: allow pop-ups for this page.');
  inspecting?.stream.close();
  const s = {
    win,
    origin: new URL(url).origin,
    connected: false,
    waiting: [],
    stream: new EventSource(`/api/channels/${encodeURIComponent(name)}/inspect`),
  };
  inspecting = s;
  s.stream.addEventListener('inspect', (m) => {
    // The window was closed: nothing reads the stream any more.
    if (s.win.closed) {
      s.stream.close();
      if (inspecting === s) inspecting = null;
      return;
    }
    const ev = JSON.parse(m.data);
    if (s.connected) s.win.postMessage(ev, s.origin);
    else s.waiting.push(ev);
  });
  s.stream.addEventListener('error', () => {
    if (s.stream.readyState === EventSource.CLOSED) toast(`"${name}" can no longer be inspected.`);
  });
  toast(`"${name}" is live in Stately Inspector. No message content, role prompt or session id is sent.`, 'ok');
}

window.addEventListener('message', (e) => {
  const s = inspecting;
  if (!s || e.source !== s.win || e.origin !== s.origin || e.data?.type !== '@statelyai.connected') return;
  s.connected = true;
  for (const ev of s.waiting.splice(0)) s.win.postMessage(ev, s.origin);
});

function renderDetail() {
  const main = $('detail');
  const d = ui.detail;
  if (!d) return main.replaceChildren(h('p.muted.empty', {}, 'Select a channel, or create one.'));
  const live = d.kind === 'live';
  const actions = live
    ? [
        h(
          'button',
          { type: 'button', onclick: togglePause, 'aria-pressed': d.paused ? 'true' : 'false' },
          d.paused ? 'Resume delivery' : 'Pause delivery',
        ),
        h('button', { type: 'button', onclick: saveChannel }, 'Save channel…'),
        h(
          'button',
          {
            type: 'button',
            onclick: () => inspectInStately(d.name),
            title:
              'Open Stately Inspector with this channel live: its envelopes, recipients and members as actors of their machines. No message content, role prompt or session id is sent.',
          },
          'Inspect in Stately',
        ),
        h('button.danger', { type: 'button', onclick: deleteChannel }, 'Delete…'),
      ]
    : [
        h('button', { type: 'button', onclick: restoreChannel }, 'Restore as new…'),
        h('button.danger', { type: 'button', onclick: deleteChannel }, 'Delete…'),
      ];
  const focused = document.activeElement?.closest?.('tr.selectable, .tab')?.dataset;
  const parts = [
    h(
      'header.detail-head',
      {},
      h('h2', {}, d.name),
      live ? badge('active', 'active') : badge('saved', 'saved'),
      live && d.paused ? badge('paused', 'paused') : null,
      h(
        'span.muted',
        {},
        live
          ? `${d.agents.length}/${d.max_members} agents`
          : `${countMessages(d.message_count)} · saved ${new Date(d.saved_at).toLocaleString()}`,
      ),
      h('div.actions', {}, actions),
    ),
    h('p.desc', {}, d.description ?? 'No description yet'),
    !live ? h('section.panel', {}, h('h3', {}, 'Summary'), h('pre.summary', {}, d.summary)) : null,
    live && d.compact_context
      ? h(
          'details.panel',
          {},
          h('summary', {}, 'Restored from a saved channel'),
          h('pre.summary', {}, d.compact_context),
        )
      : null,
    h(
      'section.panel',
      { 'aria-labelledby': 'agents-title' },
      h('h3', { id: 'agents-title' }, 'Agents'),
      agentsTable(d),
    ),
    live && ui.usage ? usagePanel() : null,
    live ? composePanel(d) : null,
    live ? joinPanel(d) : null,
    live && ui.deliveries ? deliveryPanel(ui.deliveries) : null,
  ];
  const writing = document.activeElement?.id === 'compose-text' ? document.activeElement : null;
  const caret = writing ? [writing.selectionStart, writing.selectionEnd] : null;
  main.replaceChildren(...parts.filter(Boolean));
  // Keep keyboard focus on the row or host tab it was on across a re-render (a live update must not
  // send a keyboard user's next Enter nowhere).
  if (focused?.envelope) main.querySelector(`tr[data-envelope="${CSS.escape(focused.envelope)}"]`)?.focus();
  else if (focused?.recipient) main.querySelector(`tr[data-recipient="${CSS.escape(focused.recipient)}"]`)?.focus();
  else if (focused?.host) main.querySelector(`.tab[data-host="${CSS.escape(focused.host)}"]`)?.focus();
  else if (caret) {
    const t = $('compose-text');
    t?.focus();
    t?.setSelectionRange(caret[0], caret[1]);
  }
}

function render() {
  renderChannels();
  renderDetail();
}

// ---- actions ---------------------------------------------------------------------------------

function ask(dialog) {
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue), { once: true });
    dialog.returnValue = '';
    dialog.showModal();
  });
}

async function removeAgent(a) {
  await act(
    'POST',
    `/api/channels/${encodeURIComponent(ui.selected)}/members/remove`,
    { target_session_id: a.session_id },
    (r) => r.message,
  );
}

/** Lets the wakes the loop guard or a wake budget holds go again: one member's, or (null) every one's. */
async function releaseWakes(a) {
  await act(
    'POST',
    `/api/channels/${encodeURIComponent(ui.selected)}/release`,
    a ? { member: a.session_id } : {},
    (r) => r.message,
  );
}

/** Holds or releases delivery on the selected live channel (sends are refused while it is paused). */
async function togglePause() {
  await act(
    ui.detail.paused ? 'DELETE' : 'POST',
    `/api/channels/${encodeURIComponent(ui.selected)}/pause`,
    undefined,
    (r) => r.message,
  );
}

async function saveChannel() {
  $('save-summary').value = SUMMARY_TEMPLATE;
  if ((await ask($('save-dialog'))) !== 'save') return;
  const text = $('save-summary').value.trim();
  const summary = text === SUMMARY_TEMPLATE.trim() ? '' : text;
  await act(
    'POST',
    `/api/channels/${encodeURIComponent(ui.selected)}/save`,
    summary ? { summary } : {},
    (r) => r.message,
  );
}

async function restoreChannel() {
  $('restore-name').value = '';
  if ((await ask($('restore-dialog'))) !== 'restore') return;
  const newName = $('restore-name').value.trim();
  const r = await act(
    'POST',
    `/api/channels/${encodeURIComponent(ui.selected)}/restore`,
    newName ? { new_name: newName } : {},
    (x) => x.message,
  );
  if (r) select(r.data.name);
}

async function deleteChannel() {
  const d = ui.detail;
  $('delete-text').textContent =
    d.kind === 'live'
      ? `"${d.name}" and its pending mail are deleted for good; its agents keep their host sessions.`
      : `The saved archive of "${d.name}" is deleted for good; it cannot be restored afterwards.`;
  if ((await ask($('delete-dialog'))) !== 'delete') return;
  if (await act('DELETE', `/api/channels/${encodeURIComponent(ui.selected)}`, undefined, (r) => r.message))
    select(null);
}

$('create').addEventListener('submit', async (e) => {
  e.preventDefault();
  const name = $('create-name').value.trim();
  const max = $('create-max').value.trim();
  const r = await act(
    'POST',
    '/api/channels',
    { name, ...(max ? { max_members: Number(max) } : {}) },
    (x) => x.message,
  );
  if (r) {
    $('create-name').value = '';
    select(r.data.name);
  }
});

// ---- live updates ------------------------------------------------------------------------------

function connect() {
  const es = new EventSource('/api/events');
  const live = $('live');
  es.addEventListener('hello', (e) => {
    const hello = JSON.parse(e.data);
    $('project').textContent = hello.project;
    ui.inspectorUrl = hello.inspector_url;
    live.textContent = 'live';
    live.className = 'live on';
    refresh();
  });
  es.addEventListener('refresh', () => refresh());
  es.addEventListener('error', () => {
    live.textContent = 'disconnected — reconnecting…';
    live.className = 'live off';
  });
}

(async () => {
  const m = await api('GET', '/api/machines');
  if (m.ok) ui.machines = m.data;
  connect();
})();
