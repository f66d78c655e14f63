// tollgate operator console (docs/admin-api.md#console). Plain JavaScript, no framework, no
// build step. Every number comes from the /v1 JSON API, called with the admin token in an
// Authorization header; every value from the API or the address bar is inserted as text
// (textContent, text nodes, attribute values), never parsed as markup.
'use strict';

(function () {
  const TOKEN_KEY = 'tollgate-admin-token';
  const main = document.getElementById('main');
  const state = { token: sessionStorage.getItem(TOKEN_KEY), scope: null };

  // ---- DOM helpers: the only way this script makes elements ------------------------------
  // el('td', {class: 'num'}, 'text', childNode, ...): strings and numbers become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === 'onclick' || name === 'onsubmit') node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // A value as display text: null as an em dash, objects as compact JSON (still text).
  function text(v) {
    if (v === null || v === undefined) return '—';
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }

  // "1h", "30s", "250ms", "1d" for a span in ms (for per_ms and the like).
  function span(ms) {
    if (typeof ms !== 'number') return text(ms);
    const units = [['d', 86400000], ['h', 3600000], ['m', 60000], ['s', 1000]];
    for (const [u, n] of units) if (ms >= n && ms % n === 0) return ms / n + u;
    return ms + 'ms';
  }

  function seconds(s) {
    if (typeof s !== 'number') return text(s);
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }

  // A table of rows (objects) with columns [[heading, row => cell value or Node, class]];
  // rowAttrs(row): the attributes of the row's <tr>.
  function table(columns, rows, attrs, rowAttrs) {
    const head = el('tr', {}, columns.map(([h]) => el('th', {}, h)));
    const body = rows.map((row) =>
      el('tr', rowAttrs ? rowAttrs(row) : {}, columns.map(([, cell, cls]) => {
        const v = cell(row);
        return el('td', { class: cls }, v instanceof Node ? v : text(v));
      })));
    return el('table', attrs || {}, el('thead', {}, head), el('tbody', {}, body));
  }

  // A definition list of [term, value or Node] pairs.
  function pairs(list) {
    return el('dl', {}, list.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v instanceof Node ? v : text(v))]));
  }

  function card(title, ...content) {
    return el('div', { class: 'card' }, el('h2', {}, title), content);
  }

  function show(...nodes) {
    main.replaceChildren(...nodes.flat(Infinity).filter(Boolean));
  }

  function problem(r) {
    const p = r.json || {};
    const detail = p.detail || p.title || ('HTTP ' + r.status);
    return el('div', { class: 'error', role: 'alert', 'data-status': r.status }, 'HTTP ' + r.status + ': ' + detail);
  }

  // ---- API -----------------------------------------------------------------------------
  // Calls the /v1 API with the token; answers {status, json}. A 401 forgets the token and
  // shows the login form; a 403 on a write means a read token: the write controls go away.
  async function api(method, path, body) {
    const headers = { Authorization: 'Bearer ' + state.token, Accept: 'application/json' };
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      return { status: 0, json: { detail: 'the admin listener did not answer (' + e.message + ')' } };
    }
    let json = null;
    try { json = await res.json(); } catch (e) { json = null; }
    if (res.status === 401) {
      logout('The token was refused; enter it again.');
    } else if (res.status === 403 && method !== 'GET') {
      readOnly();
    }
    return { status: res.status, json };
  }

  // Write controls exist only for a write token: every one is made through writeControl (the
  // attribute data-write marks it), and none is made while canWrite() is false.
  const canWrite = () => state.scope === 'write';

  function writeControl(tag, attrs, ...children) {
    return canWrite() ? el(tag, Object.assign({ 'data-write': true }, attrs), ...children) : null;
  }

  // A write was refused (403): the token is a read token after all; its write controls go.
  function readOnly() {
    state.scope = 'read';
    renderWho();
    for (const node of document.querySelectorAll('[data-write]')) node.remove();
    main.prepend(el('div', { class: 'error', role: 'alert', id: 'read-only' }, 'This token has the read scope: the write controls are gone.'));
  }

  // ---- Pages ---------------------------------------------------------------------------
  // Each page: an id (the hash #/<id>), a title in the navigation, and render(arg) where arg
  // is the rest of the hash, percent-decoded. Adding a page is adding an entry here.
  const PAGES = [
    { id: 'overview', title: 'Overview', render: renderOverview },
    { id: 'tenant', title: 'Tenant', render: renderTenant },
    { id: 'explain', title: 'Explain', render: renderExplain },
    { id: 'keys', title: 'Keys', render: renderKeys },
    { id: 'blocks', title: 'Blocks', render: renderBlocks },
    { id: 'limits', title: 'Limits', render: renderLimits },
  ];

  function link(page, arg, label) {
    const href = '#/' + page + (arg !== undefined ? '/' + encodeURIComponent(arg) : '');
    return el('a', { href }, label);
  }

  // The tier-layer outcomes the overview shows, in order (tollgate_decisions_total).
  const TENANT_OUTCOMES = ['admitted', 'limited', 'shadow_limited', 'pool_admitted', 'fallback', 'failed_open', 'failed_closed'];

  async function renderOverview() {
    const r = await api('GET', '/v1/status');
    if (r.status !== 200) return show(el('h1', {}, 'Overview'), problem(r));
    const s = r.json;
    const reload = s.config.last_reload;
    const redis = s.redis;
    const breakerClass = redis && redis.breaker === 'closed' ? 'ok' : 'bad';
    show(
      el('h1', {}, 'Overview'),
      el('section', { class: 'cards' },
        card('Config', pairs([
          ['version (SHA-256)', el('span', { class: 'mono', title: s.config.sha256 }, s.config.sha256.slice(0, 12))],
          ['loaded at', s.config.loaded_at],
          ['last (re)load', el('span', { class: reload.ok ? 'ok' : 'bad', id: 'reload-result' }, reload.ok ? 'succeeded' : 'rejected (running config kept)')],
          ['last success', reload.succeeded_at],
          ['loads ok / rejected', reload.loads_ok + ' / ' + reload.loads_failed],
        ])),
        card('Redis', redis ? pairs([
          ['mode', redis.mode],
          ['breaker', el('span', { class: breakerClass, id: 'breaker' }, redis.breaker)],
          ['decisions', redis.degraded ? el('span', { class: 'bad' }, 'degraded (failure policy)') : el('span', { class: 'ok' }, 'from Redis')],
          ['on failure', redis.on_failure],
        ]) : el('p', { class: 'muted' }, 'No redis: section; no tenant limits.')),
        s.shutting_down ? card('Shutdown', el('p', { class: 'bad' }, 'Graceful shutdown in progress.')) : null,
      ),
      el('h2', {}, 'Tiers'),
      el('p', { class: 'muted' }, 'Last hour: this instance\'s tenant decisions (tier fit). Decisions since start: tollgate_decisions_total{layer="tenant"}.'),
      table([
        ['tier', (t) => t.name],
        ['mode', (t) => t.mode],
        ['on failure', (t) => t.on_failure],
        ['requests (1 h)', (t) => t.last_hour.requests, 'num'],
        ['refused (1 h)', (t) => t.last_hour.refused, 'num'],
        ['tenants (1 h)', (t) => t.last_hour.tenants, 'num'],
        ...TENANT_OUTCOMES.map((o) => [o.replace('_', ' '), (t) => ((t.decisions.tenant || {})[o] || 0), 'num']),
      ], s.tiers, { id: 'tiers' }),
      el('h2', {}, 'Last minutes'),
      el('p', { class: 'muted' }, 'Tenant decisions per tier and minute (UTC), the current minute last; refusals (limited) and the failure policy\'s decisions while Redis is unavailable.'),
      lastMinutes(s.tiers),
      el('h2', {}, 'Tenants refused in the last hour'),
      s.refused_tenants.length
        ? table([
          ['tenant', (t) => link('tenant', t.tenant, t.tenant)],
          ['tier', (t) => t.tier],
          ['requests', (t) => t.requests, 'num'],
          ['refused', (t) => t.refused, 'num'],
        ], s.refused_tenants, { id: 'refused-tenants' })
        : el('p', { class: 'muted', id: 'refused-tenants' }, 'None.'),
      el('h2', {}, 'Upstreams'),
      table([
        ['upstream', (u) => u.name],
        ['backends', (u) => u.backends, 'num'],
        ['in flight / max', (u) => (u.max_concurrency === null ? 'no limit' : u.in_flight + ' / ' + u.max_concurrency), 'num'],
        ['per tenant', (u) => u.max_concurrency_per_tenant],
        ['waiting / queue', (u) => (u.queue_max === null ? 'no queue' : u.waiting + ' / ' + u.queue_max), 'num'],
        ['rejections', (u) => (Object.keys(u.rejections).length ? Object.entries(u.rejections).map(([k, n]) => k + ' ' + n).join(', ') : 0)],
      ], s.upstreams, { id: 'upstreams' }),
      el('p', {}, el('button', { type: 'button', class: 'secondary', onclick: () => renderOverview() }, 'Refresh')),
    );
  }

  // The outcomes of each minute of /v1/status's last_minutes, as rows.
  const MINUTE_ROWS = [['decisions', 'decisions'], ['limited', 'refused (limited)'], ['fallback', 'fallback'], ['failed_open', 'failed open'], ['failed_closed', 'failed closed']];

  // Rows: tier × outcome; columns: the minutes, oldest first (as the API lists them).
  function lastMinutes(tiers) {
    if (!tiers.length) return el('p', { class: 'muted', id: 'per-minute' }, 'No tiers.');
    const minutes = tiers[0].last_minutes.map((m) => m.minute);
    const rows = tiers.flatMap((t) => MINUTE_ROWS.map(([key, label]) => ({ tier: t.name, key, label, counts: t.last_minutes.map((m) => m[key]) })));
    return table([
      ['tier', (r) => r.tier],
      ['', (r) => r.label],
      ...minutes.map((m, i) => [m.slice(11, 16), (r) => r.counts[i], 'num']),
    ], rows, { id: 'per-minute', class: 'minutes' }, (r) => ({ 'data-tier': r.tier, 'data-outcome': r.key, class: r.counts.some((n) => n > 0) ? null : 'quiet' }));
  }

  function tenantSearch(id, tier) {
    return el('form', {
      class: 'row', id: 'tenant-search',
      onsubmit: (e) => {
        e.preventDefault();
        const f = e.target;
        const wanted = f.elements.id.value.trim();
        const t = f.elements.tier.value.trim();
        location.hash = '#/tenant/' + encodeURIComponent(wanted) + (t ? '?tier=' + encodeURIComponent(t) : '');
      },
    },
    el('label', {}, 'Tenant id', el('input', { name: 'id', required: true, size: 34, value: id || '', autocomplete: 'off' })),
    el('label', {}, 'Tier (optional)', el('input', { name: 'tier', size: 12, value: tier || '', autocomplete: 'off' })),
    el('button', { type: 'submit' }, 'Show'));
  }

  function policyState(p) {
    if (p.would_admit) return el('span', { class: 'ok' }, 'admits');
    return el('span', { class: 'bad' }, 'refusing');
  }

  // arg: "<id>" or "<id>?tier=<tier>" (percent-encoded parts).
  async function renderTenant(arg) {
    const [rawId, query] = (arg || '').split('?');
    const id = rawId ? decodeURIComponent(rawId) : '';
    const tier = query && query.startsWith('tier=') ? decodeURIComponent(query.slice(5)) : '';
    if (!id) return show(el('h1', {}, 'Tenant'), tenantSearch('', ''));
    const path = '/v1/tenants/' + encodeURIComponent(id) + (tier ? '?tier=' + encodeURIComponent(tier) : '');
    const r = await api('GET', path);
    const heading = el('h1', { id: 'tenant-heading' }, 'Tenant ', el('code', { id: 'tenant-id' }, id));
    if (r.status !== 200) return show(heading, tenantSearch(id, tier), problem(r));
    const t = r.json;
    const out = [heading, tenantSearch(id, tier)];
    out.push(pairs([
      ['tier', t.tier],
      ['tier from', t.tier_source],
      ['region', t.region],
      ['in flight', t.in_flight ? (t.in_flight.held === null ? '? / ' : t.in_flight.held + ' / ') + t.in_flight.max : null],
    ]));
    if (t.why) out.push(el('p', { class: 'muted' }, t.why));
    if (t.policies.length) {
      out.push(el('h2', {}, 'Policies'),
        el('p', { class: 'muted' }, 'Read without debiting. State and Retry-After: what the next request (cost 1) would get.'),
        table([
          ['policy', (p) => p.name],
          ['algorithm', (p) => p.algorithm],
          ['limit', (p) => p.limit + ' / ' + span(p.per_ms)],
          ['burst', (p) => p.burst, 'num'],
          ['remaining', (p) => p.remaining, 'num'],
          ['full in', (p) => seconds(p.seconds_until_full), 'num'],
          ['window ends in', (p) => (p.window_ends_in_s === undefined ? '' : seconds(p.window_ends_in_s)), 'num'],
          ['state', policyState],
          ['Retry-After', (p) => (p.would_admit ? '' : (p.retry_after_s === null ? 'never (cost > burst)' : p.retry_after_s + ' s')), 'num'],
        ], t.policies, { id: 'policies' }));
    }
    if (t.rules.length) {
      out.push(el('h2', {}, 'Limit rules that apply'), table([
        ['rule', (x) => x.name],
        ['mode', (x) => x.mode],
        ['key', (x) => (x.key_parts || []).join(' + ')],
        ['limit', (x) => (x.limit === undefined || x.limit === null ? (x.max_in_flight !== undefined ? 'in flight ' + x.max_in_flight : '—') : x.limit + ' / ' + span(x.per_ms))],
        ['burst', (x) => x.burst, 'num'],
        ['remaining', (x) => x.remaining, 'num'],
        ['full in', (x) => (x.seconds_until_full === undefined ? '' : seconds(x.seconds_until_full)), 'num'],
        ['on failure', (x) => x.on_failure],
      ], t.rules, { id: 'rules' }));
    }
    if (t.fit) {
      out.push(el('h2', {}, 'Tier fit (this instance)'), table([
        ['window', (w) => w[0]],
        ['requests', (w) => w[1].requests, 'num'],
        ['refused', (w) => w[1].refused, 'num'],
        ['refused share', (w) => (w[1].refused_share * 100).toFixed(1) + ' %', 'num'],
        ['minutes at limit', (w) => w[1].minutes_at_limit, 'num'],
      ], [['hour', t.fit.hour], ['day', t.fit.day]], { id: 'fit' }));
    }
    // Anonymous clients (ip:<address>) have no keys.
    if (!id.startsWith('ip:')) out.push(el('p', {}, link('keys', id, 'API keys of this tenant')));
    out.push(el('p', {}, link('limits', id, 'Live limits of this tenant')));
    if (canWrite()) out.push(resetControl(id));
    show(out);
  }

  // The reset button: a second click confirms (no browser dialog).
  function resetControl(id) {
    const box = el('div', { id: 'reset' });
    const confirmStep = () => box.replaceChildren(
      el('span', {}, 'Delete every limit state of this tenant? '),
      el('button', { type: 'button', class: 'danger', id: 'reset-confirm', onclick: doReset }, 'Reset now'),
      ' ',
      el('button', { type: 'button', class: 'secondary', onclick: first }, 'Cancel'));
    async function doReset() {
      const r = await api('POST', '/v1/tenants/' + encodeURIComponent(id) + '/reset');
      if (r.status !== 200) return box.replaceChildren(problem(r));
      await renderTenant(location.hash.replace(/^#\/tenant\//, ''));
      const done = el('div', { class: 'notice', id: 'reset-done' }, 'Reset: ' + r.json.deleted_keys + ' key(s) deleted.');
      main.insertBefore(done, main.children[1] || null);
    }
    function first() {
      box.replaceChildren(el('button', { type: 'button', class: 'danger', id: 'reset-button', onclick: confirmStep }, 'Reset limits…'));
    }
    first();
    return writeControl('div', { id: 'reset-control' }, el('h2', {}, 'Reset'), box);
  }

  // "Name: value" lines → {name: value or [values]}.
  function parseHeaders(textValue) {
    const headers = {};
    for (const line of textValue.split('\n')) {
      const at = line.indexOf(':');
      if (at <= 0) continue;
      const name = line.slice(0, at).trim().toLowerCase();
      const value = line.slice(at + 1).trim();
      if (!(name in headers)) headers[name] = value;
      else headers[name] = [].concat(headers[name], value);
    }
    return headers;
  }

  let lastExplain = { method: 'GET', host: '', path: '/', headers: '', client_ip: '' };

  function renderExplain() {
    const f = lastExplain;
    const result = el('div', { id: 'explain-result' });
    const methods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
    const form = el('form', {
      class: 'row', id: 'explain-form',
      onsubmit: async (e) => {
        e.preventDefault();
        const x = e.target.elements;
        lastExplain = { method: x.method.value, host: x.host.value.trim(), path: x.path.value, headers: x.headers.value, client_ip: x.client_ip.value.trim() };
        const body = { method: lastExplain.method, path: lastExplain.path, headers: parseHeaders(lastExplain.headers) };
        if (lastExplain.host) body.host = lastExplain.host;
        if (lastExplain.client_ip) body.client_ip = lastExplain.client_ip;
        const r = await api('POST', '/v1/explain', body);
        result.replaceChildren(r.status === 200 ? explanation(r.json) : problem(r));
      },
    },
    el('label', {}, 'Method', el('select', { name: 'method' }, methods.map((m) => el('option', { value: m, selected: m === f.method }, m)))),
    el('label', {}, 'Host', el('input', { name: 'host', size: 20, value: f.host, placeholder: 'api.example.com' })),
    el('label', {}, 'Path', el('input', { name: 'path', size: 28, value: f.path, required: true })),
    el('label', {}, 'Client IP', el('input', { name: 'client_ip', size: 15, value: f.client_ip, placeholder: '203.0.113.7' })),
    el('label', {}, 'Headers (Name: value, one a line)', el('textarea', { name: 'headers', placeholder: 'x-api-key: ...' }, f.headers)),
    el('button', { type: 'submit' }, 'Explain'));
    show(el('h1', {}, 'Explain a request'),
      el('p', { class: 'muted' }, 'What the gateway would do with this request now, layer by layer. Nothing is debited.'),
      form, result);
  }

  // One layer's fields other than its name and decision; arrays of objects as tables.
  function layerDetail(layer) {
    const rest = Object.entries(layer).filter(([k]) => k !== 'layer' && k !== 'decision');
    const simple = rest.filter(([, v]) => !(Array.isArray(v) && v.length && typeof v[0] === 'object'));
    const tables = rest.filter(([, v]) => Array.isArray(v) && v.length && typeof v[0] === 'object');
    return [
      pairs(simple),
      tables.map(([k, rows]) => {
        const keys = [...new Set(rows.flatMap((row) => Object.keys(row)))];
        return [el('h3', {}, k), table(keys.map((key) => [key, (row) => row[key]]), rows)];
      }),
    ];
  }

  function explanation(x) {
    const o = x.outcome || {};
    return el('div', {},
      el('p', { id: 'explain-outcome', class: o.status >= 400 ? 'bad' : 'ok' },
        'Outcome: ' + text(o.layer) + ' ' + text(o.decision) + ' → ' + text(o.status)),
      (x.layers || []).map((l) => el('div', { class: 'layer ' + String(l.decision).replace(/[^a-z_]/g, ''), 'data-layer': l.layer },
        el('h3', {}, text(l.layer) + ': ' + text(l.decision)), layerDetail(l))));
  }

  // ---- Keys (/v1/keys) -------------------------------------------------------------------
  const KEYS_PAGE = 25;
  // What the next render of the keys page shows once: a new secret, or a notice.
  let keysOnce = null;

  function keysHash(tenant, limit, after) {
    const q = new URLSearchParams();
    if (limit && String(limit) !== String(KEYS_PAGE)) q.set('limit', limit);
    if (after) q.set('after', after);
    const query = q.toString();
    return '#/keys/' + encodeURIComponent(tenant) + (query ? '?' + query : '');
  }

  // Goes to the keys page of `tenant` (re-rendered even when it is the page shown).
  function openKeys(tenant, once) {
    keysOnce = once;
    const hash = keysHash(tenant);
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  function keysSearch(tenant, limit) {
    return el('form', {
      class: 'row', id: 'keys-search',
      onsubmit: (e) => {
        e.preventDefault();
        const f = e.target.elements;
        location.hash = keysHash(f.tenant.value.trim(), f.limit.value.trim());
      },
    },
    el('label', {}, 'Tenant id', el('input', { name: 'tenant', required: true, size: 34, value: tenant, autocomplete: 'off' })),
    el('label', {}, 'Per page', el('input', { name: 'limit', type: 'number', min: 1, max: 1000, size: 5, value: limit })),
    el('button', { type: 'submit' }, 'Show keys'));
  }

  // The secret of a created or rotated key: the only time it is ever shown.
  function secretPanel(key, secret, rotated) {
    const field = el('input', { type: 'text', id: 'key-secret', class: 'mono secret', readonly: true, size: 52, autocomplete: 'off', spellcheck: 'false', 'aria-label': 'secret' });
    field.value = secret;
    field.addEventListener('focus', () => field.select());
    const said = el('span', { class: 'muted', id: 'key-secret-copied', role: 'status' });
    async function copy() {
      try {
        await navigator.clipboard.writeText(field.value);
        said.textContent = 'Copied.';
      } catch (e) {
        field.focus();
        field.select();
        said.textContent = 'Selected: press Ctrl+C (or ⌘C) to copy.';
      }
    }
    const panel = el('div', { class: 'once', id: 'key-secret-box' },
      el('h2', {}, (rotated ? 'New secret of key ' : 'Secret of key ') + key.name + ' (' + key.id + ')'),
      el('p', { id: 'key-secret-note', class: 'warn' }, 'Shown once: copy it now. Only its SHA-256 is kept; it cannot be shown again (rotate the key for a new secret).'),
      el('div', { class: 'row' }, field, el('button', { type: 'button', class: 'secondary', id: 'key-secret-copy', onclick: copy }, 'Copy'), said),
      rotated && key.previous_secret_valid_until
        ? el('p', { class: 'muted' }, 'The previous secret keeps working until ' + key.previous_secret_valid_until + '.')
        : null,
      el('button', { type: 'button', id: 'key-secret-done', onclick: () => panel.remove() }, 'Done: I have stored it'));
    return panel;
  }

  function keyCreateForm(tenant, tiers) {
    const expiries = [['', 'never'], ['86400', '1 day'], ['2592000', '30 days'], ['7776000', '90 days'], ['31536000', '1 year']];
    const result = el('div', { id: 'key-create-result' });
    return writeControl('div', { id: 'key-create-box' },
      el('h2', {}, 'Create a key'),
      el('form', {
        class: 'row', id: 'key-create',
        onsubmit: async (e) => {
          e.preventDefault();
          const f = e.target.elements;
          const body = { tenant: f.tenant.value.trim(), tier: f.tier.value.trim(), name: f.name.value.trim() };
          if (f.expires.value) body.expires_in_s = Number(f.expires.value);
          const r = await api('POST', '/v1/keys', body);
          if (r.status !== 200) return result.replaceChildren(problem(r));
          const { secret, ...key } = r.json;
          openKeys(key.tenant, { secret, key, rotated: false });
        },
      },
      el('label', {}, 'Tenant id', el('input', { name: 'tenant', required: true, size: 24, value: tenant, autocomplete: 'off' })),
      tiers
        ? el('label', {}, 'Tier', el('select', { name: 'tier', required: true }, tiers.map((t) => el('option', { value: t }, t))))
        : el('label', {}, 'Tier', el('input', { name: 'tier', required: true, size: 10, autocomplete: 'off' })),
      el('label', {}, 'Name (A-Z a-z 0-9 . _ -)', el('input', { name: 'name', required: true, size: 16, maxlength: 64, autocomplete: 'off' })),
      el('label', {}, 'Expires', el('select', { name: 'expires' }, expiries.map(([v, label]) => el('option', { value: v }, label)))),
      el('button', { type: 'submit', id: 'key-create-button' }, 'Create key')),
      result);
  }

  // A row's Rotate and Revoke controls, each confirmed by a second click (no browser dialog).
  function keyActions(key) {
    const box = writeControl('div', { class: 'actions' });
    if (!box) return '';
    const cancel = () => el('button', { type: 'button', class: 'secondary', onclick: first }, 'Cancel');
    async function revoke() {
      const r = await api('DELETE', '/v1/keys/' + encodeURIComponent(key.id));
      if (r.status !== 200) return box.replaceChildren(problem(r));
      openKeys(key.tenant, { notice: 'Revoked key ' + key.name + ' (' + key.id + '): every secret of it is refused within store.propagation.' });
    }
    async function rotate() {
      const grace = Number(box.querySelector('input[name=grace]').value || 0);
      const r = await api('POST', '/v1/keys/' + encodeURIComponent(key.id) + '/rotate', { grace_s: grace });
      if (r.status !== 200) return box.replaceChildren(problem(r));
      const { secret, ...rotated } = r.json;
      openKeys(key.tenant, { secret, key: rotated, rotated: true });
    }
    function first() {
      box.replaceChildren(
        el('button', { type: 'button', class: 'secondary', 'data-action': 'rotate', onclick: () => box.replaceChildren(
          el('label', {}, 'Old secret works for (s)', el('input', { name: 'grace', type: 'number', min: 0, max: 2592000, size: 8, value: 3600 })),
          el('button', { type: 'button', 'data-action': 'rotate-confirm', onclick: rotate }, 'Rotate now'), ' ', cancel()) }, 'Rotate…'),
        ' ',
        el('button', { type: 'button', class: 'danger', 'data-action': 'revoke', onclick: () => box.replaceChildren(
          el('span', {}, 'Revoke every secret of this key? '),
          el('button', { type: 'button', class: 'danger', 'data-action': 'revoke-confirm', onclick: revoke }, 'Revoke now'), ' ', cancel()) }, 'Revoke…'));
    }
    first();
    return box;
  }

  // arg: "<tenant>" or "<tenant>?limit=N&after=NAME" (percent-encoded parts).
  async function renderKeys(arg) {
    const once = keysOnce;
    keysOnce = null;
    const at = (arg || '').indexOf('?');
    const rawTenant = at < 0 ? (arg || '') : arg.slice(0, at);
    const q = new URLSearchParams(at < 0 ? '' : arg.slice(at + 1));
    const tenant = rawTenant ? decodeURIComponent(rawTenant) : '';
    const limit = q.get('limit') || String(KEYS_PAGE);
    const after = q.get('after') || '';
    const heading = el('h1', { id: 'keys-heading' }, 'API keys', tenant ? [' of ', el('code', { id: 'keys-tenant' }, tenant)] : null);
    const out = [heading, keysSearch(tenant, limit)];
    if (once && once.secret) out.push(secretPanel(once.key, once.secret, once.rotated));
    if (once && once.notice) out.push(el('div', { class: 'notice', id: 'keys-notice' }, once.notice));
    let tiers = null;
    if (canWrite()) {
      const st = await api('GET', '/v1/status');
      if (st.status === 200) tiers = st.json.tiers.map((t) => t.name);
    }
    out.push(keyCreateForm(tenant, tiers));
    if (!tenant) {
      return show(out, el('p', { class: 'muted' }, 'Keys issued through the admin API (store.keys), listed by tenant; keys of the config file are not listed.'));
    }
    const path = '/v1/keys?tenant=' + encodeURIComponent(tenant) + '&limit=' + encodeURIComponent(limit) + (after ? '&after=' + encodeURIComponent(after) : '');
    const r = await api('GET', path);
    if (r.status !== 200) return show(out, problem(r));
    const page = r.json;
    out.push(el('h2', {}, after ? 'Keys after ' + after : 'Keys'));
    if (!page.keys.length) {
      out.push(el('p', { class: 'muted', id: 'keys' }, after ? 'No more keys.' : 'No keys (revoked keys are not listed).'));
    } else {
      out.push(table([
        ['name', (k) => k.name],
        ['id', (k) => el('span', { class: 'mono' }, k.id)],
        ['tier', (k) => k.tier],
        ['status', (k) => el('span', { class: k.status === 'active' ? 'ok' : 'bad' }, k.status)],
        ['created', (k) => k.created_at],
        ['expires', (k) => k.expires_at || 'never'],
        ['rotated', (k) => k.rotated_at],
        ['old secret until', (k) => k.previous_secret_valid_until],
        ['', keyActions],
      ].filter(([h]) => h !== '' || canWrite()), page.keys, { id: 'keys' }, (k) => ({ 'data-key-id': k.id, 'data-key-name': k.name })));
    }
    out.push(el('p', { class: 'row', id: 'keys-paging' },
      after ? el('a', { href: keysHash(tenant, limit), id: 'keys-first' }, 'First page') : null,
      ' ',
      page.next ? el('a', { href: keysHash(tenant, limit, page.next), id: 'keys-next' }, 'Next page') : null));
    show(out);
  }

  // ---- Blocks (/v1/blocks) ---------------------------------------------------------------
  const BLOCK_TYPES = ['ip', 'tenant', 'key'];
  // What the next render of the blocks or limits page shows once: a notice.
  let blocksNotice = null;
  let limitsNotice = null;

  // Goes to `hash` (re-rendered even when it is the page shown).
  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  const blocksHash = (type) => '#/blocks' + (type ? '/' + encodeURIComponent(type) : '');

  function blockFilter(type) {
    return el('form', {
      class: 'row', id: 'blocks-filter',
      onsubmit: (e) => {
        e.preventDefault();
        go(blocksHash(e.target.elements.type.value));
      },
    },
    el('label', {}, 'Type', el('select', { name: 'type' },
      el('option', { value: '', selected: !type }, 'all'),
      BLOCK_TYPES.map((t) => el('option', { value: t, selected: t === type }, t)))),
    el('button', { type: 'submit' }, 'Show blocks'));
  }

  function blockAddForm(type) {
    const expiries = [['', 'until removed'], ['600', '10 minutes'], ['3600', '1 hour'], ['86400', '1 day'], ['2592000', '30 days']];
    const result = el('div', { id: 'block-add-result' });
    return writeControl('div', { id: 'block-add-box' },
      el('h2', {}, 'Add a block'),
      el('form', {
        class: 'row', id: 'block-add',
        onsubmit: async (e) => {
          e.preventDefault();
          const f = e.target.elements;
          const kind = f.type.value;
          const value = f.value.value.trim();
          const body = { reason: f.reason.value };
          if (f.expires.value) body.expires_in_s = Number(f.expires.value);
          const r = await api('PUT', '/v1/blocks/' + encodeURIComponent(kind) + '/' + encodeURIComponent(value), body);
          if (r.status !== 200) return result.replaceChildren(problem(r));
          blocksNotice = 'Blocked ' + r.json.type + ' ' + r.json.value + ': refused with 403 on every instance within store.propagation.';
          go(blocksHash(type));
        },
      },
      el('label', {}, 'Type', el('select', { name: 'type' }, BLOCK_TYPES.map((t) => el('option', { value: t, selected: t === type }, t)))),
      el('label', {}, 'Value (address or CIDR, tenant id, key id)', el('input', { name: 'value', required: true, size: 26, autocomplete: 'off', placeholder: '203.0.113.0/24' })),
      el('label', {}, 'Reason', el('input', { name: 'reason', required: true, size: 30, maxlength: 500, autocomplete: 'off' })),
      el('label', {}, 'Expires', el('select', { name: 'expires' }, expiries.map(([v, label]) => el('option', { value: v }, label)))),
      el('button', { type: 'submit', id: 'block-add-button' }, 'Block')),
      result);
  }

  // A row's Remove control, confirmed by a second click (no browser dialog).
  function blockActions(block, type) {
    const box = writeControl('div', { class: 'actions' });
    if (!box) return '';
    async function remove() {
      const r = await api('DELETE', '/v1/blocks/' + encodeURIComponent(block.type) + '/' + encodeURIComponent(block.value));
      if (r.status !== 200) return box.replaceChildren(problem(r));
      blocksNotice = 'Removed the block of ' + block.type + ' ' + block.value + '.';
      go(blocksHash(type));
    }
    function first() {
      box.replaceChildren(el('button', { type: 'button', class: 'danger', 'data-action': 'unblock', onclick: () => box.replaceChildren(
        el('span', {}, 'Remove this block? '),
        el('button', { type: 'button', class: 'danger', 'data-action': 'unblock-confirm', onclick: remove }, 'Remove now'), ' ',
        el('button', { type: 'button', class: 'secondary', onclick: first }, 'Cancel')) }, 'Remove…'));
    }
    first();
    return box;
  }

  // arg: "" (every type) or "<type>".
  async function renderBlocks(arg) {
    const notice = blocksNotice;
    blocksNotice = null;
    const type = BLOCK_TYPES.includes(arg) ? arg : '';
    const out = [el('h1', {}, 'Blocks'), blockFilter(type)];
    if (notice) out.push(el('div', { class: 'notice', id: 'blocks-notice' }, notice));
    out.push(blockAddForm(type));
    const r = await api('GET', '/v1/blocks' + (type ? '?type=' + encodeURIComponent(type) : ''));
    if (r.status !== 200) return show(out, problem(r));
    out.push(el('h2', {}, 'In force'));
    const blocks = r.json.blocks;
    if (!blocks.length) {
      out.push(el('p', { class: 'muted', id: 'blocks' }, 'No blocks (expired ones are not listed).'));
    } else {
      out.push(table([
        ['type', (b) => b.type],
        ['value', (b) => el('span', { class: 'mono' }, b.value)],
        ['reason', (b) => b.reason],
        ['created', (b) => b.created_at],
        ['expires', (b) => b.expires_at || 'never'],
        ['remaining', (b) => (b.remaining_s === null ? '' : seconds(b.remaining_s)), 'num'],
        ['', (b) => blockActions(b, type)],
      ].filter(([h]) => h !== '' || canWrite()), blocks, { id: 'blocks' }, (b) => ({ 'data-block-type': b.type, 'data-block-value': b.value })));
    }
    show(out);
  }

  // ---- Live limits (/v1/tenants/{id}/limits) ---------------------------------------------
  const limitsHash = (tenant) => '#/limits' + (tenant ? '/' + encodeURIComponent(tenant) : '');

  function limitsSearch(tenant) {
    return el('form', {
      class: 'row', id: 'limits-search',
      onsubmit: (e) => {
        e.preventDefault();
        go(limitsHash(e.target.elements.tenant.value.trim()));
      },
    },
    el('label', {}, 'Tenant id', el('input', { name: 'tenant', required: true, size: 34, value: tenant, autocomplete: 'off' })),
    el('button', { type: 'submit' }, 'Show limits'));
  }

  // "month=200000, day=10000" → {month: 200000, day: 10000}; a bad entry → null.
  function parseQuotas(textValue) {
    const out = {};
    for (const part of textValue.split(',').map((p) => p.trim()).filter(Boolean)) {
      const at = part.indexOf('=');
      if (at <= 0) return null;
      const n = Number(part.slice(at + 1).trim());
      if (!Number.isInteger(n)) return null;
      out[part.slice(0, at).trim()] = n;
    }
    return out;
  }

  // The set form, filled with the override in force (if any); empty fields are not sent.
  function limitsSetForm(tenant, current) {
    const o = current || {};
    const expiries = [['', 'never'], ['600', '10 minutes'], ['3600', '1 hour'], ['86400', '1 day'], ['2592000', '30 days']];
    const quotas = o.quotas ? Object.entries(o.quotas).map(([p, n]) => p + '=' + n).join(', ') : '';
    const result = el('div', { id: 'limits-set-result' });
    const num = (name, label, value, max) => el('label', {}, label, el('input', { name, type: 'number', min: 1, max, size: 10, value: value === undefined ? '' : value }));
    return writeControl('div', { id: 'limits-set-box' },
      el('h2', {}, current ? 'Replace the override' : 'Set an override'),
      el('p', { class: 'muted' }, 'Replaces the whole override; at least one limit. Quotas as period=limit, comma-separated (month=200000, day=10000).'),
      el('form', {
        class: 'row', id: 'limits-set',
        onsubmit: async (e) => {
          e.preventDefault();
          const f = e.target.elements;
          const body = {};
          for (const name of ['limit', 'burst', 'max_in_flight']) if (f[name].value !== '') body[name] = Number(f[name].value);
          if (f.per.value.trim()) body.per = f.per.value.trim();
          if (f.quotas.value.trim()) {
            const q = parseQuotas(f.quotas.value);
            if (!q) return result.replaceChildren(el('div', { class: 'error', role: 'alert' }, 'Quotas: write period=limit pairs, comma-separated (month=200000).'));
            body.quotas = q;
          }
          if (f.expires.value) body.expires_in_s = Number(f.expires.value);
          const r = await api('PUT', '/v1/tenants/' + encodeURIComponent(tenant) + '/limits', body);
          if (r.status !== 200) return result.replaceChildren(problem(r));
          limitsNotice = 'Override set: in force on every instance within store.propagation.';
          go(limitsHash(tenant));
        },
      },
      num('limit', 'Limit', o.limit, 50000000),
      el('label', {}, 'Per', el('input', { name: 'per', size: 6, value: o.per || '', placeholder: '1m', autocomplete: 'off' })),
      num('burst', 'Burst', o.burst, 10000),
      el('label', {}, 'Quotas', el('input', { name: 'quotas', size: 24, value: quotas, placeholder: 'month=200000', autocomplete: 'off' })),
      num('max_in_flight', 'Max in flight', o.max_in_flight, 4294967296),
      el('label', {}, 'Expires', el('select', { name: 'expires' }, expiries.map(([v, label]) => el('option', { value: v }, label)))),
      el('button', { type: 'submit', id: 'limits-set-button' }, 'Set override')),
      result);
  }

  // The Clear control, confirmed by a second click (no browser dialog).
  function limitsClearControl(tenant) {
    const box = writeControl('div', { class: 'actions', id: 'limits-clear' });
    if (!box) return null;
    async function clear() {
      const r = await api('DELETE', '/v1/tenants/' + encodeURIComponent(tenant) + '/limits');
      if (r.status !== 200) return box.replaceChildren(problem(r));
      limitsNotice = 'Override cleared: the file\'s limits apply.';
      go(limitsHash(tenant));
    }
    function first() {
      box.replaceChildren(el('button', { type: 'button', class: 'danger', 'data-action': 'limits-clear', onclick: () => box.replaceChildren(
        el('span', {}, 'Remove this override (the file\'s limits apply again)? '),
        el('button', { type: 'button', class: 'danger', 'data-action': 'limits-clear-confirm', onclick: clear }, 'Clear now'), ' ',
        el('button', { type: 'button', class: 'secondary', onclick: first }, 'Cancel')) }, 'Clear override…'));
    }
    first();
    return box;
  }

  // arg: "<tenant>" (percent-encoded).
  async function renderLimits(arg) {
    const notice = limitsNotice;
    limitsNotice = null;
    const tenant = arg ? decodeURIComponent(arg) : '';
    const heading = el('h1', { id: 'limits-heading' }, 'Live limits', tenant ? [' of ', el('code', { id: 'limits-tenant' }, tenant)] : null);
    const out = [heading, limitsSearch(tenant)];
    if (!tenant) {
      return show(out, el('p', { class: 'muted' }, 'A tenant\'s override of its file limits (store.overrides), one tenant at a time.'));
    }
    if (notice) out.push(el('div', { class: 'notice', id: 'limits-notice' }, notice));
    const r = await api('GET', '/v1/tenants/' + encodeURIComponent(tenant) + '/limits');
    if (r.status !== 200) return show(out, problem(r));
    const o = r.json.override;
    out.push(el('h2', {}, 'Override in force'));
    if (!o) {
      out.push(el('p', { class: 'muted', id: 'limits-override' }, 'None: the file\'s limits apply.'));
    } else {
      out.push(el('div', { id: 'limits-override' }, pairs([
        ['limit', o.limit],
        ['per', o.per],
        ['burst', o.burst],
        ['quotas', o.quotas ? Object.entries(o.quotas).map(([p, n]) => p + ' ' + n).join(', ') : null],
        ['max in flight', o.max_in_flight],
        ['expires', o.expires_at || 'never'],
        ['updated', o.updated_at],
      ])));
    }
    out.push(el('p', {}, link('tenant', tenant, 'The tenant\'s policies (remaining, refill)')));
    out.push(limitsSetForm(tenant, o));
    if (o) out.push(limitsClearControl(tenant));
    show(out);
  }

  // ---- Login, navigation, routing ------------------------------------------------------
  function renderWho() {
    const who = document.getElementById('who');
    who.textContent = state.token ? 'token scope: ' + (state.scope || '?') : '';
    document.getElementById('logout').hidden = !state.token;
  }

  function logout(message) {
    state.token = null;
    state.scope = null;
    sessionStorage.removeItem(TOKEN_KEY);
    renderWho();
    renderLogin(message);
  }

  function renderLogin(message) {
    document.getElementById('nav').replaceChildren();
    show(el('h1', {}, 'Sign in'),
      el('p', { class: 'muted' }, 'The admin token (admin.token_env). It is kept in this tab only (sessionStorage) and sent as a Bearer header.'),
      message ? el('div', { class: 'error' }, message) : null,
      el('form', {
        class: 'row', id: 'login',
        onsubmit: async (e) => {
          e.preventDefault();
          state.token = e.target.elements.token.value.trim();
          const r = await api('GET', '/v1/whoami');
          if (r.status !== 200) return;
          sessionStorage.setItem(TOKEN_KEY, state.token);
          state.scope = r.json.scope;
          start();
        },
      },
      el('label', {}, 'Admin token', el('input', { type: 'password', name: 'token', required: true, autocomplete: 'off', size: 40 })),
      el('button', { type: 'submit' }, 'Sign in')));
  }

  function renderNav(current) {
    document.getElementById('nav').replaceChildren(...PAGES.map((p) => {
      const a = link(p.id, undefined, p.title);
      if (p.id === current) a.setAttribute('class', 'current');
      return a;
    }));
  }

  async function route() {
    if (!state.token) return renderLogin();
    const hash = location.hash.replace(/^#\/?/, '');
    const slash = hash.indexOf('/');
    const id = slash < 0 ? hash : hash.slice(0, slash);
    const arg = slash < 0 ? undefined : hash.slice(slash + 1);
    const page = PAGES.find((p) => p.id === id) || PAGES[0];
    renderNav(page.id);
    await page.render(arg);
  }

  async function start() {
    if (state.token && !state.scope) {
      const r = await api('GET', '/v1/whoami');
      if (r.status !== 200) return;
      state.scope = r.json.scope;
    }
    renderWho();
    await route();
  }

  document.getElementById('logout').addEventListener('click', () => logout());
  window.addEventListener('hashchange', route);
  start();
})();
