// The operator console at /admin: the sales with live figures, a sale's queue, valve and stock
// over the last hour, its knobs, and a buyer's attempts with their trail and a refund. It uses
// only the public API, with the admin key kept in this tab's session storage; a key whose role
// does not allow a change sees no control for it.
'use strict';

(() => {
  const KEY = 'sluice-admin-key';
  const ROLES = ['viewer', 'operator', 'admin'];
  const $ = (id) => document.getElementById(id);
  let me = null;
  let timer = null;

  function say(text, bad) {
    const m = $('message');
    m.textContent = text;
    m.className = bad ? 'bad' : '';
  }

  async function api(method, path, body) {
    const res = await fetch(path, {
      method,
      headers: {
        'X-Admin-Key': sessionStorage.getItem(KEY) || '',
        ...(body ? { 'Content-Type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const answer = res.status === 204 ? null : await res.json().catch(() => null);
    if (res.status === 401) signOut('The key is not valid (unknown or revoked).');
    if (!res.ok) throw new Error((answer && answer.detail) || `${method} ${path}: ${res.status}`);
    return answer;
  }

  const may = (role) => me && ROLES.indexOf(me.role) >= ROLES.indexOf(role);

  function show(id) {
    for (const view of ['sign-in', 'sales', 'sale']) $(view).hidden = view !== id;
    $('who').hidden = !me;
    for (const el of document.querySelectorAll('[data-needs]')) {
      el.hidden = !may(el.dataset.needs);
    }
  }

  function signOut(why) {
    sessionStorage.removeItem(KEY);
    me = null;
    clearInterval(timer);
    show('sign-in');
    $('sign-in-error').textContent = why || '';
    $('key').focus();
  }

  async function signIn(key) {
    sessionStorage.setItem(KEY, key);
    me = await api('GET', '/v1/admin/self');
    $('who-name').textContent = `${me.name} (${me.role})`;
    route();
  }

  function cell(text, numeric) {
    const td = document.createElement('td');
    td.textContent = text;
    if (numeric) td.className = 'n';
    return td;
  }

  async function salesView() {
    show('sales');
    const draw = async () => {
      const page = await api('GET', '/v1/sales?limit=100');
      const rows = await Promise.all(page.sales.map(async (s) => {
        const stats = await api('GET', `/v1/sales/${s.id}/stats`).catch(() => null);
        const tr = document.createElement('tr');
        const name = document.createElement('td');
        const link = document.createElement('a');
        link.href = `#/sales/${s.id}`;
        link.textContent = s.name;
        name.append(link);
        const n = (v) => (stats ? String(v) : '–');
        tr.append(name, cell(s.status),
          cell(n(stats && stats.waiting), true),
          cell(n(stats && stats.admitted + stats.holding + stats.paying), true),
          cell(n(stats && stats.units.sold), true),
          cell(n(stats && stats.remaining), true), cell(String(s.total), true));
        return tr;
      }));
      $('sales-rows').replaceChildren(...rows);
    };
    await draw();
    timer = setInterval(() => draw().catch((e) => say(e.message, true)), 5000);
  }

  // One chart: each series a polyline over the points' times, scaled to the largest value.
  function chart(svg, points, series) {
    const ns = 'http://www.w3.org/2000/svg';
    const W = 300, H = 110;
    const max = Math.max(1, ...points.flatMap((p) => series.map(([key]) => p[key] || 0)));
    const t0 = points.length ? Date.parse(points[0].at) : 0;
    const span = points.length > 1 ? Date.parse(points[points.length - 1].at) - t0 : 1;
    const parts = series.map(([key], i) => {
      const line = document.createElementNS(ns, 'polyline');
      line.setAttribute('class', `s${i}`);
      line.setAttribute('points', points.map((p) =>
        `${((Date.parse(p.at) - t0) / span * W).toFixed(1)},${(H - (p[key] || 0) / max * (H - 10)).toFixed(1)}`).join(' '));
      return line;
    });
    const legend = document.createElementNS(ns, 'text');
    legend.setAttribute('x', '2');
    legend.setAttribute('y', '118');
    const last = points[points.length - 1] || {};
    legend.textContent = series.map(([key, label]) => `${label} ${Math.round(last[key] || 0)}`).join(' · ') + ` (max ${Math.round(max)})`;
    svg.replaceChildren(...parts, legend);
  }

  async function saleView(id) {
    show('sale');
    const draw = async () => {
      const [sale, figures] = await Promise.all([
        api('GET', `/v1/sales/${id}`),
        api('GET', `/v1/sales/${id}/figures?minutes=60`),
      ]);
      $('sale-name').textContent = sale.name;
      const last = figures.points[figures.points.length - 1];
      $('sale-summary').textContent = `${sale.status} · ${sale.remaining} of ${sale.total} free` +
        (last ? ` · waiting ${last.waiting} · rate in force ${Math.round(last.rate_per_minute)}/min` +
          (last.decision ? ` (controller: ${last.decision})` : '') : ' · no figures yet');
      chart($('chart-queue'), figures.points, [['waiting', 'waiting'], ['active', 'active']]);
      chart($('chart-valve'), figures.points, [['rate_per_minute', 'rate'], ['admitted_per_minute', 'admitted/min']]);
      chart($('chart-stock'), figures.points, [['holding_units', 'holding'], ['paying_units', 'paying'], ['sold_units', 'sold'], ['remaining', 'free']]);
      return sale;
    };
    const sale = await draw();
    const form = $('admission');
    form.rate_per_minute.value = sale.rate_per_minute;
    form.max_active.value = sale.max_active;
    form.mode.value = sale.admission_mode;
    form.min_rate_per_minute.value = sale.min_rate_per_minute || '';
    form.max_rate_per_minute.value = sale.max_rate_per_minute || '';
    $('proof-of-work').difficulty_bits.value = sale.proof_of_work_bits;
    $('sale').dataset.sale = id;
    timer = setInterval(() => draw().catch((e) => say(e.message, true)), 2000);
  }

  async function act(what, work) {
    try {
      await work();
      say(what);
    } catch (e) {
      say(e.message, true);
    }
  }

  const saleId = () => $('sale').dataset.sale;
  const number = (v) => (v === '' ? undefined : Number(v));

  function wire() {
    $('sign-in').addEventListener('submit', (e) => {
      e.preventDefault();
      signIn($('key').value.trim()).catch((err) => signOut(err.message));
    });
    $('sign-out').addEventListener('click', () => signOut());
    for (const button of document.querySelectorAll('[data-action]')) {
      button.addEventListener('click', () => {
        const action = button.dataset.action;
        if (action === 'close' && !window.confirm('Close the sale for good? Everyone still waiting is told it ended.')) return;
        act(`Sale: ${action} done.`, () => api('POST', `/v1/sales/${saleId()}/${action}`));
      });
    }
    $('admission').addEventListener('submit', (e) => {
      e.preventDefault();
      const f = e.target;
      const body = { rate_per_minute: Number(f.rate_per_minute.value), max_active: Number(f.max_active.value), mode: f.mode.value };
      if (f.mode.value === 'adaptive') {
        body.min_rate_per_minute = number(f.min_rate_per_minute.value);
        body.max_rate_per_minute = number(f.max_rate_per_minute.value);
      }
      act('Admission set.', () => api('PUT', `/v1/sales/${saleId()}/admission`, body));
    });
    $('proof-of-work').addEventListener('submit', (e) => {
      e.preventDefault();
      act('Proof of work set.', () => api('PUT', `/v1/sales/${saleId()}/proof-of-work`, { difficulty_bits: Number(e.target.difficulty_bits.value) }));
    });
    $('stock').addEventListener('submit', (e) => {
      e.preventDefault();
      const op = e.submitter ? e.submitter.value : 'add';
      act(`Stock: ${op} done.`, () => api('POST', `/v1/sales/${saleId()}/stock`, { [op]: Number(e.target.units.value) }));
    });
    $('lookup').addEventListener('submit', (e) => {
      e.preventDefault();
      lookup(e.target.user_id.value.trim()).catch((err) => say(err.message, true));
    });
  }

  // A buyer's attempts in this sale, each with its trail; a refund button on a purchase.
  async function lookup(user) {
    const page = await api('GET', `/v1/sales/${saleId()}/attempts?user_id=${encodeURIComponent(user)}`);
    const files = await Promise.all(page.attempts.map((a) => api('GET', `/v1/sales/${saleId()}/attempts/${a.attempt_id}`)));
    const blocks = files.map((file) => {
      const a = file.attempt;
      const box = document.createElement('article');
      const h = document.createElement('h4');
      h.textContent = `${a.attempt_id.slice(0, 12)}… ${a.state}${a.reason ? ` (${a.reason})` : ''}`;
      h.className = 'attempt-state';
      const table = document.createElement('table');
      for (const t of file.trail) {
        const tr = document.createElement('tr');
        tr.append(cell(t.at), cell(`${t.from} → ${t.to}`), cell(t.reason || ''), cell(t.cause));
        table.append(tr);
      }
      box.append(h, table);
      if (a.state === 'CONFIRMED' && may('operator')) {
        const refund = document.createElement('button');
        refund.type = 'button';
        refund.textContent = 'Refund';
        refund.addEventListener('click', () => {
          if (!window.confirm(`Refund ${user}'s purchase? Its units go back on sale.`)) return;
          act('Refunded.', async () => {
            await api('POST', `/v1/sales/${saleId()}/attempts/${a.attempt_id}/refund`);
            await lookup(user);
          });
        });
        box.append(refund);
      }
      return box;
    });
    $('attempts').replaceChildren(...blocks);
    if (!blocks.length) say(`No attempt of ${user} in this sale.`);
  }

  function route() {
    clearInterval(timer);
    if (!me) return signOut();
    const m = location.hash.match(/^#\/sales\/([0-9a-f-]{36})$/);
    (m ? saleView(m[1]) : salesView()).catch((e) => say(e.message, true));
  }

  wire();
  window.addEventListener('hashchange', route);
  const kept = sessionStorage.getItem(KEY);
  if (kept) signIn(kept).catch(() => signOut());
  else signOut();
})();
