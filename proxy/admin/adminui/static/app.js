// kproxy's routing page. Read-only: it fetches one page of each list from
// the proxy and follows /v1/events. Every value is set with textContent,
// never parsed as HTML: topic and group names come from clients.
'use strict';

const $ = (id) => document.getElementById(id);

const lists = {
  partitions: { url: '/v1/ui/partitions', offset: 0, limit: 100, total: 0, filter: {}, body: '#partitions tbody', range: 'part-range', count: 'part-count', render: partitionRow },
  topics: { url: '/v1/ui/topics', offset: 0, limit: 20, total: 0, filter: {}, body: '#topics tbody', range: 'topic-range', count: 'topic-count', render: topicRow },
  groups: { url: '/v1/ui/groups', offset: 0, limit: 20, total: 0, filter: {}, body: '#groups tbody', range: 'group-range', count: 'group-count', render: groupRow },
};

let version = -1;
let reloadTimer = null;

function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function yesNo(b) { return b ? ['yes', 'yes'] : ['no', 'no']; }

function owner(id) { return id < 0 ? '–' : String(id); }

function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm' + String(s % 60).padStart(2, '0') + 's';
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h' + String(m % 60).padStart(2, '0') + 'm';
  return Math.floor(h / 24) + 'd' + (h % 24) + 'h';
}

function clock(iso) { return new Date(iso).toLocaleTimeString(); }

function sinceText(since, known) {
  if (since === '') return '–';
  const d = duration(Date.now() - Date.parse(since));
  return known ? d : '≥ ' + d;
}

// Kafka topic names have no '/', so this key is unique.
function partKey(topic, partition) { return topic + '/' + partition; }

function partitionRow(p) {
  const tr = document.createElement('tr');
  tr.dataset.key = partKey(p.topic, p.partition);
  tr.dataset.since = p.owner < 0 ? '' : p.since;
  tr.dataset.known = p.since_known ? '1' : '';
  cell(tr, p.topic);
  cell(tr, String(p.partition));
  cell(tr, owner(p.owner), 'owner');
  cell(tr, p.epoch < 0 ? '–' : String(p.epoch), 'epoch');
  const [t, c] = p.owner < 0 ? ['–', ''] : yesNo(p.live);
  cell(tr, t, 'live ' + c);
  cell(tr, p.owner < 0 ? '–' : sinceText(p.since, p.since_known), 'since');
  return tr;
}

function topicRow(t) {
  const tr = document.createElement('tr');
  cell(tr, t.name);
  cell(tr, String(t.partitions));
  cell(tr, String(t.owned), t.owned < t.partitions ? 'no' : 'yes');
  return tr;
}

function groupRow(g) {
  const tr = document.createElement('tr');
  cell(tr, g.group);
  cell(tr, owner(g.coordinator));
  cell(tr, g.epoch < 0 ? '–' : String(g.epoch));
  const [t, c] = yesNo(g.live);
  cell(tr, t, c);
  return tr;
}

function fill(selector, rows, render) {
  const body = document.querySelector(selector);
  const frag = document.createDocumentFragment();
  for (const r of rows) frag.appendChild(render(r));
  body.replaceChildren(frag);
}

async function load(name) {
  const l = lists[name];
  const q = new URLSearchParams({ offset: String(l.offset), limit: String(l.limit) });
  for (const [k, v] of Object.entries(l.filter)) if (v !== '') q.set(k, v);
  let page;
  try {
    const r = await fetch(l.url + '?' + q, { cache: 'no-store' });
    if (!r.ok) {
      $(l.range).textContent = (await r.text()).trim();
      return;
    }
    page = await r.json();
  } catch (e) {
    $(l.range).textContent = 'unavailable';
    return;
  }
  l.total = page.total;
  fill(l.body, page.rows, l.render);
  const last = Math.min(page.offset + page.rows.length, page.total);
  $(l.range).textContent = page.total === 0 ? 'none' : (page.offset + 1) + '–' + last + ' of ' + page.total;
  $(l.count).textContent = '(' + page.total + (Object.values(l.filter).some((v) => v !== '') ? ' matching' : '') + ')';
}

function reloadAll() {
  reloadTimer = null;
  for (const name of Object.keys(lists)) load(name);
}

function scheduleReload() {
  if (reloadTimer === null) reloadTimer = setTimeout(reloadAll, 300);
}

function renderState(s) {
  const box = $('state');
  box.replaceChildren();
  const item = (label, value, ok) => {
    const span = document.createElement('span');
    span.textContent = label + ' ';
    const b = document.createElement('b');
    b.textContent = value;
    if (ok !== undefined) b.className = ok ? 'yes' : 'no';
    span.appendChild(b);
    box.appendChild(span);
  };
  item('ready', s.ready ? 'yes' : 'no', !!s.ready);
  item('etcd', s.connected ? 'connected' : 'disconnected', !!s.connected);
  item('revision', String(s.revision ?? '–'));
  item('route age', s.route_age_seconds === undefined ? '–' : s.route_age_seconds.toFixed(1) + 's', (s.route_age_seconds ?? 0) < 10);
  item('live brokers', String(s.live_brokers ?? '–'));
  item('fetch from', s.fetch_from || '–');
  item('zone', s.zone || '–');
  if (s.draining) item('draining', 'yes', false);
}

function renderBrokers(brokers) {
  $('broker-count').textContent = '(' + brokers.filter((b) => b.live).length + ' live)';
  fill('#brokers tbody', brokers, (b) => {
    const tr = document.createElement('tr');
    tr.dataset.broker = String(b.id);
    cell(tr, String(b.id));
    cell(tr, b.addr);
    cell(tr, b.rack || '–');
    const [t, c] = yesNo(b.live);
    cell(tr, t, c);
    cell(tr, String(b.partitions));
    cell(tr, String(b.groups));
    cell(tr, b.live ? 'now' : clock(b.last_seen));
    return tr;
  });
}

function num(x) { return x >= 100 ? x.toFixed(0) : x.toFixed(x >= 10 ? 1 : 2); }

function renderRates(r) {
  $('rate-window').textContent = r.window_seconds > 0 ? '(over ' + r.window_seconds.toFixed(1) + 's)' : '(measuring…)';
  fill('#rates-api tbody', r.by_api, (a) => {
    const tr = document.createElement('tr');
    cell(tr, a.name);
    cell(tr, num(a.requests));
    cell(tr, num(a.errors), a.errors > 0 ? 'no' : '');
    cell(tr, num(a.retries || 0));
    cell(tr, String(a.total));
    return tr;
  });
  fill('#rates-broker tbody', r.by_broker, (b) => {
    const tr = document.createElement('tr');
    cell(tr, b.name);
    cell(tr, num(b.requests));
    cell(tr, num(b.errors), b.errors > 0 ? 'no' : '');
    cell(tr, String(b.inflight || 0));
    cell(tr, String(b.connections || 0));
    return tr;
  });
}

function changeItem(c) {
  const li = document.createElement('li');
  const t = document.createElement('time');
  t.dateTime = c.at;
  t.textContent = clock(c.at);
  li.appendChild(t);
  li.appendChild(document.createTextNode(c.topic + '/' + c.partition + ': ' + owner(c.from) + ' → ' + owner(c.to) + ' (epoch ' + c.epoch + ')'));
  return li;
}

function renderRecent(recent) { fill('#changes', recent.slice(0, 100), changeItem); }

function onOverview(o) {
  renderState(o.state || {});
  renderBrokers(o.brokers);
  renderRates(o.rates);
  renderRecent(o.recent);
  if (o.version !== version) {
    version = o.version;
    scheduleReload();
  }
}

// onChanges patches the visible rows at once; the reload that follows the
// next overview brings the window (and filters by owner) up to date.
function onChanges(changes) {
  const rows = new Map();
  for (const tr of document.querySelectorAll('#partitions tbody tr')) rows.set(tr.dataset.key, tr);
  const list = $('changes');
  for (const c of changes) {
    list.insertBefore(changeItem(c), list.firstChild);
    const tr = rows.get(partKey(c.topic, c.partition));
    if (!tr) continue;
    tr.querySelector('.owner').textContent = owner(c.to);
    tr.querySelector('.epoch').textContent = c.epoch < 0 ? '–' : String(c.epoch);
    // A broker that just took a partition holds a lease: it is live.
    const live = tr.querySelector('.live');
    live.textContent = c.to < 0 ? '–' : 'yes';
    live.className = c.to < 0 ? 'live' : 'live yes';
    tr.dataset.since = c.to < 0 ? '' : c.at;
    tr.dataset.known = '1';
    tr.querySelector('.since').textContent = sinceText(tr.dataset.since, true);
    tr.classList.add('flash');
    setTimeout(() => tr.classList.remove('flash'), 2000);
  }
  while (list.children.length > 100) list.lastChild.remove();
}

function tickAges() {
  for (const tr of document.querySelectorAll('#partitions tbody tr')) {
    tr.querySelector('.since').textContent = sinceText(tr.dataset.since, tr.dataset.known === '1');
  }
}

function wireFilter(formId, name, fields) {
  const form = $(formId);
  const l = lists[name];
  let timer = null;
  const apply = () => {
    for (const [key, id] of Object.entries(fields)) l.filter[key] = $(id).value.trim();
    l.offset = 0;
    load(name);
  };
  form.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(apply, 250); });
  form.addEventListener('submit', (e) => { e.preventDefault(); apply(); });
  form.addEventListener('click', (e) => {
    const dir = e.target.dataset && e.target.dataset.page;
    if (!dir) return;
    if (dir === 'next' && l.offset + l.limit < l.total) l.offset += l.limit;
    if (dir === 'prev') l.offset = Math.max(0, l.offset - l.limit);
    load(name);
  });
}

function connect() {
  const es = new EventSource('/v1/events');
  const status = $('stream');
  es.addEventListener('open', () => { status.textContent = 'live'; status.className = 'stream yes'; });
  es.addEventListener('error', () => { status.textContent = 'reconnecting…'; status.className = 'stream no'; });
  es.addEventListener('overview', (e) => onOverview(JSON.parse(e.data)));
  es.addEventListener('changes', (e) => onChanges(JSON.parse(e.data)));
}

wireFilter('part-filter', 'partitions', { topic: 'part-topic', broker: 'part-broker' });
wireFilter('topic-filter', 'topics', { topic: 'topic-name' });
wireFilter('group-filter', 'groups', { group: 'group-name' });
setInterval(tickAges, 1000);
connect();
