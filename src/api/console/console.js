// The operator console at /admin: the sales with live figures, a sale's queue, valve and stock
// over the last hour, its knobs, and a buyer's attempts with their trail and a refund. It uses
// only the public API, with the admin key kept in this tab's session storage; a key whose role
// does not allow a change sees no control for it. It speaks English and Korean.
import { operator as enTexts } from '/waiting-room/texts-en.js';
import { operator as koTexts } from '/waiting-room/texts-ko.js';
import { languageOf, money as moneyIn, translator } from '/waiting-room/i18n.js';
import { clientWith, Problem } from '/waiting-room/api.js';

(() => {
  const KEY = 'sluice-admin-key';
  const ROLES = ['viewer', 'operator', 'admin'];
  const $ = (id) => document.getElementById(id);
  let me = null;
  let timer = null;

  // The console speaks the operator's language: the page's `lang` (the server's pick from
  // Accept-Language), English otherwise. Its texts are the page's files' (`operator`).
  const TEXTS = { en: enTexts, ko: koTexts };
  const LANG = languageOf(TEXTS, null, document.documentElement.lang);
  const t = translator(TEXTS, () => LANG);

  function translate() {
    for (const el of document.querySelectorAll('[data-t]')) el.textContent = t(el.dataset.t);
    for (const el of document.querySelectorAll('[data-t-label]')) el.setAttribute('aria-label', t(el.dataset.tLabel));
  }

  function say(text, bad) {
    const m = $('message');
    m.textContent = text;
    m.className = bad ? 'bad' : '';
  }

  // The public API with the admin key; a key refused (401) signs the operator out.
  const call = clientWith(() => ({ 'X-Admin-Key': sessionStorage.getItem(KEY) || '' }));
  async function api(method, path, body) {
    try {
      return await call(method, path, body);
    } catch (e) {
      if (e instanceof Problem && e.status === 401) signOut(t('keyInvalid'));
      throw e;
    }
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

  // An amount in a currency's smallest unit, as the operator reads it.
  const money = (amount, currency) => moneyIn(amount, currency, LANG);

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
        tr.append(name, cell(t(s.status)),
          cell(n(stats && stats.waiting), true),
          cell(n(stats && stats.admitted + stats.holding + stats.paying), true),
          cell(n(stats && stats.units.sold), true),
          cell(n(stats && stats.remaining), true), cell(String(s.total), true));
        return tr;
      }));
      $('sales-rows').replaceChildren(...rows);
    };
    await draw();
    await gatesView();
    timer = setInterval(() => draw().catch((e) => say(e.message, true)), 5000);
  }

  const GATE_MODES = { on: 'gateOn', queue_all: 'gateQueueAll', off: 'gateOff' };

  /// The gates and their switch (an operator turns it: on, queue everyone, off).
  async function gatesView() {
    const { gates } = await api('GET', '/v1/gates');
    const rows = gates.map((g) => {
      const tr = document.createElement('tr');
      const line = document.createElement('td');
      const link = document.createElement('a');
      link.href = `#/sales/${g.sale_id}`;
      link.textContent = g.sale_id.slice(0, 8);
      line.append(link);
      const mode = document.createElement('select');
      mode.setAttribute('aria-label', `${t('colGateMode')} ${g.name}`);
      mode.disabled = !may('operator');
      for (const [value, key] of Object.entries(GATE_MODES)) mode.add(new Option(t(key), value, false, g.mode === value));
      mode.addEventListener('change', () => act(async () => {
        const { id, ...rules } = g;
        await api('PUT', `/v1/gates/${id}`, { ...rules, mode: mode.value });
        g.mode = mode.value;
        return t('gateModeSet', g.name, t(GATE_MODES[mode.value]));
      }));
      const switchCell = document.createElement('td');
      switchCell.append(mode);
      tr.append(cell(g.name), cell([...g.hosts, ...g.paths].join(' ')), line, switchCell);
      return tr;
    });
    $('gate-rows').replaceChildren(...rows);
    $('end-gate').replaceChildren(...gates.map((g) => new Option(g.name, g.id)));
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
    legend.textContent = series.map(([key, label]) => `${label} ${Math.round(last[key] || 0)}`).join(' · ') + ` (${t('max')} ${Math.round(max)})`;
    svg.replaceChildren(...parts, legend);
  }

  async function saleView(id) {
    show('sale');
    const draw = async () => {
      const [sale, figures, stats] = await Promise.all([
        api('GET', `/v1/sales/${id}`),
        api('GET', `/v1/sales/${id}/figures?minutes=60`),
        api('GET', `/v1/sales/${id}/stats`).catch(() => null),
      ]);
      $('sale-name').textContent = sale.name;
      const last = figures.points[figures.points.length - 1];
      const m = stats && stats.money;
      const takings = m ? `${t('takings', money(m.sold, m.currency), money(m.held + m.paying, m.currency),
        money(m.refunded, m.currency))} · ` : '';
      $('sale-summary').textContent = `${t(sale.status)} · ${t('free', sale.remaining, sale.total)} · ${takings}` +
        (last ? `${t('waiting', last.waiting)} · ${t('rateInForce', Math.round(last.rate_per_minute))}` +
          (last.decision ? ` ${t('controller', last.decision)}` : '') : t('noFigures'));
      chart($('chart-queue'), figures.points, [['waiting', t('seriesWaiting')], ['active', t('seriesActive')]]);
      chart($('chart-valve'), figures.points, [['rate_per_minute', t('seriesRate')], ['admitted_per_minute', t('seriesAdmitted')]]);
      chart($('chart-stock'), figures.points, [['holding_units', t('seriesHolding')], ['paying_units', t('seriesPaying')],
        ['sold_units', t('seriesSold')], ['remaining', t('seriesFree')]]);
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
    await phasesView(id);
    await venue.show(sale);
    timer = setInterval(() => Promise.all([draw(), venue.refresh()]).catch((e) => say(e.message, true)), 2000);
  }

  // ---- a sale's seat map: per section free, held, sold and withdrawn; seats selected on the
  // ---- map withdrawn or put back on sale ------------------------------------------------------

  const venue = (() => {
    let sale = null;
    let layout = null;
    const seats = new Map(); // id -> { el, state, label }
    const chosen = new Set();

    function paint(seat) {
      seat.el.setAttribute('class', `${seat.state}${chosen.has(seat.id) ? ' chosen' : ''}`);
      seat.el.setAttribute('aria-checked', String(chosen.has(seat.id)));
      seat.el.setAttribute('aria-label', `${seat.label}, ${t('seatState')[seat.state]}`);
    }

    function choose(ids, on) {
      for (const id of ids) {
        if (on) chosen.add(id); else chosen.delete(id);
        paint(seats.get(id));
      }
      $('venue-chosen').textContent = chosen.size ? t('chosenSeats', chosen.size) : '';
    }

    function draw() {
      seats.clear();
      const svg = SeatMap.draw(layout, ({ id, el, section, row, seat }) => {
        const record = { id, el, state: 'free', x: seat.x, y: seat.y, label: `${section.name} ${row.id}-${seat.number}` };
        seats.set(id, record);
        return record;
      }, (seat) => choose([seat.id], !chosen.has(seat.id)));
      svg.setAttribute('aria-label', t('seatMap'));
      // A box dragged on the map selects the seats inside it.
      let from = null;
      const box = SeatMap.element('rect', { class: 'box' });
      const at = (ev) => {
        const p = svg.createSVGPoint();
        [p.x, p.y] = [ev.clientX, ev.clientY];
        return p.matrixTransform(svg.getScreenCTM().inverse());
      };
      svg.addEventListener('pointerdown', (ev) => {
        if (ev.target.tagName === 'circle') return;
        from = at(ev);
        svg.setPointerCapture(ev.pointerId);
        svg.append(box);
      });
      svg.addEventListener('pointermove', (ev) => {
        if (!from) return;
        const to = at(ev);
        for (const [k, v] of Object.entries({ x: Math.min(from.x, to.x), y: Math.min(from.y, to.y),
          width: Math.abs(to.x - from.x), height: Math.abs(to.y - from.y) })) box.setAttribute(k, v);
      });
      svg.addEventListener('pointerup', (ev) => {
        if (!from) return;
        const to = at(ev);
        const [xa, xb, ya, yb] = [Math.min(from.x, to.x), Math.max(from.x, to.x), Math.min(from.y, to.y), Math.max(from.y, to.y)];
        from = null;
        box.remove();
        choose([...seats.values()].filter((s) => s.x >= xa && s.x <= xb && s.y >= ya && s.y <= yb).map((s) => s.id), true);
      });
      $('venue-map').replaceChildren(svg);
    }

    /// The map's states on the seats, and each section's counts (withdrawn: the rest).
    function apply(map) {
      SeatMap.eachState(layout, map, (id, state) => {
        const seat = seats.get(id);
        seat.state = state;
        paint(seat);
      });
      const rows = map.sections.map((section) => {
        const inLayout = layout.sections.find((s) => s.id === section.id);
        const total = inLayout.rows.reduce((n, row) => n + row.seats.length, 0);
        const tr = document.createElement('tr');
        tr.append(cell(inLayout.name), cell(section.free, true), cell(section.held, true), cell(section.sold, true),
          cell(total - section.free - section.held - section.sold, true));
        return tr;
      });
      $('section-rows').replaceChildren(...rows);
    }

    async function refresh() {
      if (!layout) return;
      apply(await api('GET', `/v1/public/sales/${sale}/seat-map`));
    }

    /// The selected seats in `state`, sent as `field` of a stock change.
    async function change(state, field, none, done) {
      const ids = [...chosen].filter((id) => seats.get(id).state === state);
      if (!ids.length) { say(t(none), true); return; }
      await act(t(done, ids.length), async () => {
        await api('POST', `/v1/sales/${sale}/stock`, { [field]: ids });
        choose([...chosen], false);
        await refresh();
      });
    }

    $('withdraw-seats').addEventListener('click', () => change('free', 'withdraw_seats', 'noneToWithdraw', 'seatsWithdrawn'));
    $('add-seats').addEventListener('click', () => change('off', 'add_seats', 'noneToAdd', 'seatsAdded'));
    $('clear-seats').addEventListener('click', () => choose([...chosen], false));

    return {
      async show(s) {
        sale = s.id;
        $('venue').hidden = !s.layout_id;
        layout = null;
        chosen.clear();
        $('venue-chosen').textContent = '';
        if (!s.layout_id) return;
        layout = await api('GET', `/v1/public/layouts/${s.layout_id}`);
        draw();
        await refresh();
      },
      refresh,
    };
  })();

  // ---- a sale's phases: the timeline, figures, the list uploaded, codes made and exported ----

  const at = (iso) => new Date(iso).toLocaleString(LANG, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

  async function phasesView(id) {
    const { phases } = await api('GET', `/v1/sales/${id}/phases`);
    $('phases').hidden = phases.length === 0;
    if (!phases.length) return;
    // The timeline: one band a phase, as wide as its share of the time from the first start
    // to the last (the last one a fixed share).
    const first = Date.parse(phases[0].starts_at);
    const span = Math.max(1, Date.parse(phases[phases.length - 1].starts_at) - first);
    const bands = phases.map((p, i) => {
      const li = document.createElement('li');
      const next = phases[i + 1];
      const share = next ? (Date.parse(next.starts_at) - Date.parse(p.starts_at)) / span : 0.25;
      li.style.flexGrow = String(Math.max(0.08, share));
      li.className = p.in_effect ? 'now' : phases.slice(i + 1).some((q) => q.begun || q.in_effect) ? 'begun' : '';
      li.textContent = `${p.name} · ${at(p.starts_at)}`;
      return li;
    });
    $('timeline').replaceChildren(...bands);
    const rows = phases.map((p, i) => {
      const tr = document.createElement('tr');
      const over = phases.slice(i + 1).some((q) => q.begun || q.in_effect);
      const state = p.in_effect ? t('running') : over ? t('begun') : t('upcoming');
      const access = p.audience === 'list' ? t('members', p.members)
        : p.audience === 'codes' ? t('codesOf', p.codes, p.codes_redeemed) : '';
      const who = p.position > 0 && p.opening === 'lottery_at_open'
        ? `${t(p.audience)} · ${t('drawn', at(p.joins_from))}` : t(p.audience);
      tr.append(cell(`${p.name} (${state})`), cell(at(p.starts_at)), cell(who),
        cell(p.joined ?? '–', true), cell(p.admitted, true), cell(p.bought, true), cell(access));
      const tools = document.createElement('td');
      if (p.audience === 'list' && may('operator')) tools.append(listUpload(id, p.position));
      if (p.audience === 'codes' && may('operator')) tools.append(...codeTools(id, p.position));
      tr.append(tools);
      return tr;
    });
    $('phase-rows').replaceChildren(...rows);
  }

  /// A CSV file of user ids, sent as it is to addPhaseMembers.
  function listUpload(id, position) {
    const label = document.createElement('label');
    const input = document.createElement('input');
    input.type = 'file';
    input.accept = '.csv,text/csv,text/plain';
    input.className = 'list-upload';
    label.append(t('uploadList'), ' ', input);
    input.addEventListener('change', () => {
      const file = input.files[0];
      if (!file) return;
      act(async () => {
        const res = await fetch(`/v1/sales/${id}/phases/${position}/members`, {
          method: 'POST',
          headers: { 'X-Admin-Key': sessionStorage.getItem(KEY), 'Content-Type': 'application/octet-stream' },
          body: file,
        });
        const body = await res.json().catch(() => ({}));
        if (!res.ok) throw new Error(body.detail || `HTTP ${res.status}`);
        await phasesView(id);
        return t('uploaded', body.added, body.total);
      });
    });
    return label;
  }

  /// Generating a phase's codes, and exporting them all as a CSV download.
  function codeTools(id, position) {
    const form = document.createElement('form');
    form.className = 'codes';
    form.innerHTML = '<label><span></span> <input name="count" type="number" min="1" max="10000" value="100" required></label>'
      + '<label><span></span> <input name="max_uses" type="number" min="1" value="1" required></label><button type="submit"></button>';
    const [count, uses] = form.querySelectorAll('span');
    count.textContent = t('howMany');
    uses.textContent = t('uses');
    form.querySelector('button').textContent = t('generate');
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const body = { count: Number(form.count.value), max_uses: Number(form.max_uses.value) };
      act(async () => {
        const made = await api('POST', `/v1/sales/${id}/phases/${position}/codes`, body);
        await phasesView(id);
        return t('generated', made.codes.length);
      });
    });
    const exporter = document.createElement('button');
    exporter.type = 'button';
    exporter.className = 'export-codes';
    exporter.textContent = t('exportCodes');
    exporter.addEventListener('click', () => act(async () => {
      const lines = ['code,max_uses,used'];
      let after = '';
      for (;;) {
        const page = await api('GET', `/v1/sales/${id}/phases/${position}/codes?limit=1000${after ? `&after=${encodeURIComponent(after)}` : ''}`);
        for (const c of page.codes) lines.push(`${c.code},${c.max_uses},${c.used}`);
        if (!page.next_cursor) break;
        after = page.next_cursor;
      }
      const link = document.createElement('a');
      link.href = URL.createObjectURL(new Blob([`${lines.join('\n')}\n`], { type: 'text/csv' }));
      link.download = `codes-${id}-phase-${position}.csv`;
      link.click();
      URL.revokeObjectURL(link.href);
      return '';
    }));
    return [form, exporter];
  }

  /// Runs an operator's change and says what it did: `what`, or what `work` returns.
  async function act(what, work) {
    if (typeof what === 'function') [what, work] = [null, what];
    try {
      const said = await work();
      say(what ?? said);
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
    $('end-session').addEventListener('submit', (e) => {
      e.preventDefault();
      act(t('sessionEnded'), () => api('POST',
        `/v1/gates/${$('end-gate').value}/sessions/${$('end-visitor').value.trim()}/end`));
    });
    for (const button of document.querySelectorAll('[data-action]')) {
      button.addEventListener('click', () => {
        const action = button.dataset.action;
        if (action === 'close' && !window.confirm(t('confirmClose'))) return;
        act(t('done', t(action)), () => api('POST', `/v1/sales/${saleId()}/${action}`));
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
      act(t('admissionSet'), () => api('PUT', `/v1/sales/${saleId()}/admission`, body));
    });
    $('proof-of-work').addEventListener('submit', (e) => {
      e.preventDefault();
      act(t('powSet'), () => api('PUT', `/v1/sales/${saleId()}/proof-of-work`, { difficulty_bits: Number(e.target.difficulty_bits.value) }));
    });
    $('stock').addEventListener('submit', (e) => {
      e.preventDefault();
      const op = e.submitter ? e.submitter.value : 'add';
      act(t('stockDone', t(op)), () => api('POST', `/v1/sales/${saleId()}/stock`, { [op]: Number(e.target.units.value) }));
    });
    $('lookup').addEventListener('submit', (e) => {
      e.preventDefault();
      lookup(e.target.user_id.value.trim()).catch((err) => say(err.message, true));
    });
  }

  // A buyer's attempts in this sale, each with its trail; a refund button on a purchase; first,
  // their place in the queue while they wait.
  async function lookup(user) {
    const page = await api('GET', `/v1/sales/${saleId()}/attempts?user_id=${encodeURIComponent(user)}`);
    const files = await Promise.all(page.attempts.map((a) => api('GET', `/v1/sales/${saleId()}/attempts/${a.attempt_id}`)));
    const blocks = files.map((file) => {
      const a = file.attempt;
      const box = document.createElement('article');
      const h = document.createElement('h4');
      h.textContent = `${a.attempt_id.slice(0, 12)}… ${a.state}${a.reason ? ` (${a.reason})` : ''}` +
        (a.amount !== undefined ? ` · ${money(a.amount, a.currency)}` : '');
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
        refund.textContent = t('refund');
        refund.addEventListener('click', () => {
          if (!window.confirm(t('confirmRefund', user))) return;
          act(t('refunded'), async () => {
            await api('POST', `/v1/sales/${saleId()}/attempts/${a.attempt_id}/refund`);
            await lookup(user);
          });
        });
        box.append(refund);
      }
      return box;
    });
    if (page.waiting) {
      const w = page.waiting;
      const box = document.createElement('article');
      const h = document.createElement('h4');
      h.textContent = `${w.attempt_id.slice(0, 12)}… QUEUED · ${t('place', w.position, w.waiting)}`;
      h.className = 'attempt-state';
      box.append(h);
      blocks.unshift(box);
    }
    $('attempts').replaceChildren(...blocks);
    if (!blocks.length) say(t('noAttempt', user));
  }

  function route() {
    clearInterval(timer);
    if (!me) return signOut();
    const m = location.hash.match(/^#\/sales\/([0-9a-f-]{36})$/);
    (m ? saleView(m[1]) : salesView()).catch((e) => say(e.message, true));
  }

  translate();
  wire();
  window.addEventListener('hashchange', route);
  const kept = sessionStorage.getItem(KEY);
  if (kept) signIn(kept).catch(() => signOut());
  else signOut();
})();
