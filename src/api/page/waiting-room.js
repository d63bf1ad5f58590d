// The waiting room: join a sale, follow your place live, then hold, pay and see the outcome.
//
// Reads `?sale=<id>` and the user's token from `#token=<JWT>` (kept in sessionStorage and
// removed from the address bar, so it is neither shared nor logged). Status comes over
// Server-Sent Events, read with fetch so the token travels in the Authorization header; if the
// stream cannot be opened or drops, the page polls, waiting `poll_after_ms` as the server asks.
// It speaks the visitor's language (English and Korean: the server picks from Accept-Language
// and sets <html lang>; the switch overrides it, remembered in localStorage), and solves a
// sale's proof of work in a Web Worker (proof-of-work.js) before it joins. An ES module, served
// as it is: its texts (texts-<language>.js), its calls of the API (api.js), what it shows for an
// attempt (screen.js, a pure function this file draws) and each payment provider's way to pay
// (pay-<provider>.js, loaded when an answer names that provider).
//
// In front of a site (`?gate=<id>&return_to=…`, reached through the site's own proxy) the
// visitor needs no account: the page enters the gate (a visitor cookie keeps one place per
// browser), joins its line at once, and when the turn comes trades the admission for the
// site's session and goes back to the page first asked for.

import en from './texts-en.js';
import ko from './texts-ko.js';
import { at, client, isTransient, payWith, Problem, problemOf } from './api.js';
import { backoff, pollDelay } from './timing.js';
import { languageOf, money as moneyIn, translator } from './i18n.js';
import { screenOf } from './screen.js';

(() => {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  let saleId = params.get('sale');
  const gateId = params.get('gate');
  const returnTo = params.get('return_to');
  /// A gate's visitor's user id (`visitor-<id>`): what the proof of work is bound to.
  let visitorUser = '';
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get('token')) {
    sessionStorage.setItem('sluice.token', fragment.get('token'));
    history.replaceState(null, '', location.pathname + location.search);
  }
  let token = gateId ? null : sessionStorage.getItem('sluice.token');
  let attemptKey = `sluice.attempt.${saleId}`;
  // Back from a payment provider's window (`?attempt=`): that attempt is the one to show, even
  // if this page, ending as it left, had let go of it.
  if (params.get('attempt')) {
    sessionStorage.setItem(attemptKey, params.get('attempt'));
    params.delete('attempt');
    history.replaceState(null, '', `${location.pathname}?${params}`);
  }
  const STEPS = ['join', 'challenge', 'proving', 'queued', 'admitted', 'held', 'paying', 'done'];
  const ENDED = ['CONFIRMED', 'EXPIRED'];

  // ---- the visitor's language ----------------------------------------------------------------

  const MESSAGES = { en, ko };
  const chosen = localStorage.getItem('sluice.language');
  let lang = languageOf(MESSAGES, chosen, document.documentElement.lang);
  const t = translator(MESSAGES, () => lang);

  /// The page's fixed texts in the language; the step on screen is drawn again by the caller.
  function translate() {
    document.documentElement.lang = lang;
    for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
    for (const el of document.querySelectorAll('[data-i18n-label]')) el.setAttribute('aria-label', t(el.dataset.i18nLabel));
    $('language').value = lang;
    lotteryTexts();
  }

  /// A lottery sale before its opening: the order is drawn then, so joining early gives no
  /// advantage, and the place shown until then is not yet the one that counts.
  function lotteryTexts() {
    // A later lottery phase's pre-queue is drawn at that phase's start; else the sale's opening.
    const phase = phaseNow();
    const [opening, drawAt] = phase && phase.joins_from ? [phase.opening, phase.starts_at]
      : [offer && offer.opening, offer && offer.opens_at];
    const ahead = opening === 'lottery_at_open' && Date.now() < Date.parse(drawAt);
    const at = ahead ? new Date(drawAt).toLocaleTimeString(lang, { hour: '2-digit', minute: '2-digit' }) : '';
    $('join-intro').textContent = ahead ? t('joinIntroLottery', at) : t('joinIntro');
    $('lottery-note').textContent = ahead ? t('lotteryNote', at) : '';
    $('lottery-note').hidden = !ahead;
  }

  let offer = null;
  let attempt = null;
  let firstPosition = null;
  let following = null; // AbortController of the live status
  let shownStep = null;
  let redraw = null; // draws the step on screen again (after a change of language)
  let titleNow = ''; // the tab's title for the step on screen
  let flashing = null; // the timer flashing the tab's title when the turn came

  // ---- talking to sluice -------------------------------------------------------------------

  const api = client(() => token);

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  /// Follows the attempt until it ends: SSE first, polling when the stream is unavailable.
  async function follow() {
    if (following) following.abort();
    const control = new AbortController();
    following = control;
    while (!control.signal.aborted && attempt && !ENDED.includes(attempt.state)) {
      try {
        await stream(control.signal);
      } catch (e) {
        if (control.signal.aborted) return;
        if (e instanceof Problem) { handleProblem(e); if (!isTransient(e)) return; }
      }
      if (control.signal.aborted || !attempt || ENDED.includes(attempt.state)) return;
      await poll(control.signal);
    }
  }

  /// The attempt's status path; with its queue ticket the answer comes from the server's view
  /// of the queue, without a lookup in the queue store.
  function statusPath(suffix = '') {
    const ticket = attempt.queue_ticket ? `?ticket=${encodeURIComponent(attempt.queue_ticket)}` : '';
    return `/v1/attempts/${attempt.attempt_id}${suffix}${ticket}`;
  }

  let lastEventId = null; // of the status stream: a reconnect is not sent the same answer again

  async function stream(signal) {
    const headers = { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' };
    if (lastEventId) headers['Last-Event-ID'] = lastEventId;
    const res = await fetch(at(statusPath('/events')), { headers, signal });
    if (!res.ok || !res.body) throw await problemOf(res);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const lines = event.split('\n');
        const data = lines.filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart()).join('\n');
        const id = lines.find((l) => l.startsWith('id:'));
        if (id) lastEventId = id.slice(3).trim();
        if (data) show(JSON.parse(data));
      }
    }
  }

  /// One round of polling (used while the stream is down), then back to trying the stream.
  async function poll(signal) {
    for (let i = 0; i < 5 && !signal.aborted; i++) {
      await sleep(pollDelay(attempt));
      if (signal.aborted) return;
      try {
        show(await api('GET', statusPath()));
      } catch (e) {
        handleProblem(e);
        if (!isTransient(e)) return;
      }
      if (ENDED.includes(attempt.state)) return;
    }
  }


  /// The user id the token names (`sub`): the proof of work is bound to it.
  function tokenUser() {
    if (visitorUser) return visitorUser;
    try {
      const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return JSON.parse(atob(payload)).sub;
    } catch (e) {
      return '';
    }
  }

  /// Finds the sale's proof of work in a Web Worker, showing its progress; resolves the nonce.
  function prove(pow) {
    step('proving', t('proving'));
    $('proof-progress').value = 0;
    say(t('provingSay', 0));
    return new Promise((resolve, reject) => {
      const worker = new Worker(at('/waiting-room/proof-of-work.js'));
      let said = 0;
      worker.onmessage = ({ data }) => {
        if (data.nonce !== undefined) {
          worker.terminate();
          $('proof-progress').value = 100;
          resolve(data.nonce);
          return;
        }
        // Tries so far against those expected: a guide, not a promise (luck decides).
        const done = Math.min(99, Math.floor((100 * data.progress) / data.expected));
        $('proof-progress').value = done;
        if (done >= said + 25) { said = done - (done % 25); say(t('provingSay', said)); }
      };
      worker.onerror = (e) => { worker.terminate(); reject(e); };
      worker.postMessage({ salt: pow.salt, sale: saleId, user: tokenUser(), bits: pow.difficulty_bits });
    });
  }

  /// Joins, with the sale's proof of work when it asks for one (again if it was raised since).
  async function join() {
    for (let round = 0; round < 3; round++) {
      const pow = offer && offer.proof_of_work;
      const headers = pow ? { 'Sluice-Proof-Of-Work': await prove(pow) } : {};
      const code = $('access-code').value.trim();
      if (code) headers['Sluice-Access-Code'] = code;
      try {
        return await api('POST', `/v1/sales/${saleId}/attempts`, undefined, headers);
      } catch (e) {
        if (e.type !== '/problems/proof-of-work-required') throw e;
        offer = await api('GET', `/v1/sales/${saleId}/offer`); // a new difficulty or salt
      }
    }
    throw new Problem(428, { detail: t('ended') }, 0);
  }

  // ---- what the user sees ------------------------------------------------------------------

  function say(text) { $('status').textContent = text; }

  function alertUser(text) {
    const box = $('alert');
    box.textContent = text;
    box.hidden = !text;
  }

  function step(name, title) {
    for (const s of STEPS) $(`step-${s}`).hidden = s !== name;
    $('status').classList.toggle('sr-only', name === 'done');
    $('title').textContent = title;
    titleNow = `${title} — ${offer ? offer.name : t('waitingRoom')}`;
    if (name !== 'admitted') stopFlashing();
    if (!flashing) document.title = titleNow;
    if (shownStep !== name) {
      shownStep = name;
      $('title').focus(); // keyboard and screen-reader users land on the new step
    }
  }

  /// A time of today or another day, in the visitor's language.
  function when(iso) {
    const d = new Date(iso);
    const sameDay = d.toDateString() === new Date().toDateString();
    return sameDay ? d.toLocaleTimeString(lang, { hour: '2-digit', minute: '2-digit' })
      : d.toLocaleString(lang, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  }

  /// The sale's phase joins follow now (the first before the opening), if it has phases.
  function phaseNow() {
    const phases = (offer && offer.phases) || [];
    let current = phases[0] || null;
    for (const p of phases) if (Date.parse(p.joins_from || p.starts_at) <= Date.now()) current = p;
    return current;
  }

  /// The join step's timeline of phases, and the access code field when the phase running
  /// now lets in holders of codes.
  function showPhases() {
    const phases = (offer && offer.phases) || [];
    $('phases-note').hidden = phases.length < 2;
    $('phases-note').textContent = phases.map((p) => t('phaseFrom', p.name, when(p.starts_at))).join(' · ');
    const now = phaseNow();
    $('access-code-field').hidden = !(now && now.audience === 'codes');
  }

  /// What is left, when the offer knows it, on the steps before the turn.
  function showLeft() {
    showPhases();
    // A gate's line holds no stock: nothing is left or sold out.
    const known = !gateId && offer && typeof offer.remaining === 'number';
    for (const id of ['join-left', 'queued-left']) {
      $(id).hidden = !known;
      if (known) $(id).textContent = offer.remaining > 0 ? t('left', offer.remaining) : t('leftNone');
    }
  }

  const countdowns = {};
  function countdown(id, until) {
    countdowns[id] = until ? new Date(until) : null;
    tick();
  }
  function tick() {
    for (const [id, until] of Object.entries(countdowns)) {
      const el = $(id);
      if (!until) { el.textContent = '–'; continue; }
      const left = Math.max(0, Math.round((until - Date.now()) / 1000));
      el.dateTime = `PT${left}S`;
      el.textContent = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')}`;
    }
  }
  setInterval(tick, 1000);

  /// An amount in the currency's smallest unit, in the visitor's language.
  const money = (amount, currency) => moneyIn(amount, currency, lang);

  // ---- paying with the provider's own script -----------------------------------------------

  const OWN = ['sandbox', 'webhook']; // sluice's own ways to pay: no script of a provider's
  const ways = new Map(); // the modules of the providers' ways to pay, by provider

  /// The provider's way to pay (`pay-<provider>.js`: a form on the page, or its window),
  /// loaded once; none for sluice's own.
  function wayToPay(provider) {
    if (!provider || OWN.includes(provider)) return Promise.resolve(null);
    if (!ways.has(provider)) ways.set(provider, import(`./pay-${provider}.js`));
    return ways.get(provider);
  }

  const scripts = new Map(); // the provider's scripts, loading or loaded, by URL

  /// The provider's script (its SDK), loaded once from where checkout says
  /// (`payment.pay.js_url`).
  function loadScript(url) {
    if (!scripts.has(url)) {
      scripts.set(url, new Promise((resolve, reject) => {
        const script = document.createElement('script');
        script.src = url;
        script.onload = resolve;
        script.onerror = () => {
          scripts.delete(url);
          reject(new Error(t('paymentUnavailable')));
        };
        document.head.append(script);
      }));
    }
    return scripts.get(url);
  }

  let formMounted = null; // the key of the payment form on the page
  let formMounting = null; // the mounting under way: answers that arrive meanwhile wait for it
  let formPay = null; // confirms the payment with what the buyer entered

  /// Mounts the provider's payment form for the attempt (what it needs comes with checkout's
  /// answer; a page opened later asks checkout again, which answers the same payment).
  function mountForm(next, way) {
    formMounting ??= mountFormOnce(next, way).finally(() => { formMounting = null; });
    return formMounting;
  }

  async function mountFormOnce(next, way) {
    if (!next.payment.pay && formMounted) return;
    const pay = await payWith(next, api);
    if (!pay || formMounted === way.formKey(pay)) return;
    formPay = await way.mount(pay, $('pay-form-element'), { lang, loadScript });
    formMounted = way.formKey(pay);
  }

  /// Opens the provider's payment window for the attempt. Some send the buyer back to sluice,
  /// which confirms and brings them back here; others answer here, and report to sluice by
  /// their webhook. Whether it was paid here.
  async function payInWindow(next) {
    const way = await wayToPay(next.payment.provider);
    const pay = await payWith(next, api);
    if (!way || !pay) return false;
    const { paid, failure } = await way.open(pay, { lang, loadScript });
    if (failure) showFailure(failure);
    return paid;
  }

  /// Shows the provider's way to pay: its form mounted on the page, or the button that opens
  /// its window.
  async function showWayToPay(next) {
    const way = await wayToPay(next.payment.provider);
    $('pay-form').hidden = !way || way.kind !== 'form';
    $('provider-window').hidden = !way || way.kind !== 'window';
    if (way && way.kind === 'form') await mountForm(next, way);
  }

  /// The last failed try, in the visitor's language: a provider's code the page knows is said
  /// in words (the code kept after them); any other reason as the provider gave it.
  function showFailure(failure) {
    $('payment-failure').hidden = !failure;
    if (!failure) return;
    const code = /^([A-Z][A-Z0-9_]+): /.exec(failure);
    const known = code && MESSAGES[lang].providerErrors[code[1]];
    $('payment-failure').textContent = t('lastFailure', known ? `${known} (${code[1]})` : failure);
  }

  // ---- in front of a site -------------------------------------------------------------------

  /// Enters the gate as its visitor: the browser's visitor if it is one already (its cookie),
  /// else a new one. The visitor's token then joins and follows the gate's line.
  async function enterGate() {
    const entry = await api('GET', `/v1/gates/${gateId}/entry`);
    saleId = entry.sale_id;
    attemptKey = `sluice.attempt.${saleId}`;
    let visitor;
    try {
      // A browser that is a visitor already (its cookie) needs no challenge again.
      visitor = await api('POST', `/v1/gates/${gateId}/visitors`, {});
    } catch (e) {
      if (!(e instanceof Problem) || e.type !== '/problems/challenge-failed' || !entry.script_url) throw e;
      const answer = await solveChallenge(entry);
      visitor = await api('POST', `/v1/gates/${gateId}/visitors`, { challenge_answer: answer });
    }
    token = visitor.token;
    visitorUser = `visitor-${visitor.visitor_id}`;
  }

  /// Shows the gate's challenge (Turnstile or hCaptcha, rendered explicitly from the script
  /// the gate names) and resolves its answer once the visitor passes it.
  async function solveChallenge(entry) {
    step('challenge', t('challenge'));
    await loadScript(entry.script_url);
    const widget = entry.challenge === 'turnstile' ? window.turnstile : window.hcaptcha;
    return new Promise((resolve, reject) => {
      widget.render($('challenge-widget'), {
        sitekey: entry.site_key,
        callback: resolve,
        'error-callback': () => reject(new Problem(403, { detail: t('ended') }, 0)),
      });
    });
  }

  let trading = false;

  /// The visitor's turn: the admission becomes the site's session, and the visitor goes back
  /// to the page first asked for (the address replaced: Back does not return to the line).
  async function tradeAdmission(next) {
    if (trading) return;
    trading = true;
    try {
      const session = await api('POST', `/v1/gates/${gateId}/session`, {
        attempt_id: next.attempt_id,
        admission_token: next.admission_token,
        return_to: returnTo,
      });
      sessionStorage.removeItem(attemptKey);
      location.replace(session.location);
    } catch (e) {
      trading = false;
      handleProblem(e);
    }
  }

  /// Draws `next` as `screenOf` (screen.js) decides it, and does what the step asks besides.
  function show(next) {
    if (gateId && next.state === 'ADMITTED' && next.admission_token) tradeAdmission(next);
    const screen = screenOf(next, { before: attempt, firstPosition, t, money });
    attempt = next;
    firstPosition = screen.firstPosition;
    sessionStorage.setItem(attemptKey, next.attempt_id);
    alertUser('');
    redraw = () => show(attempt);
    if (screen.done) {
      // A failed leave changes nothing for the user.
      if (screen.leave) api('DELETE', `/v1/attempts/${next.attempt_id}`).catch(() => {});
      finish(screen.done.good, screen.title, screen.done.text);
      $('again').hidden = !screen.done.again;
      return;
    }
    step(screen.step, screen.title);
    for (const [id, text] of Object.entries(screen.texts)) $(id).textContent = text;
    switch (screen.step) {
      case 'queued':
        lotteryTexts();
        $('progress').value = screen.progress;
        showLeft();
        showNotify();
        break;
      case 'admitted':
        prepareChoice();
        break;
      case 'paying':
        $('sandbox').hidden = !(next.payment && next.payment.provider === 'sandbox');
        if (next.payment) showFailure(next.payment.last_failure);
        if (screen.pay) showWayToPay(next).catch(handleProblem);
        break;
    }
    if (screen.countdown) countdown(...screen.countdown);
    if (screen.say) say(screen.say);
    if (screen.tellTurn) tellTurn(next);
  }

  function finish(good, title, text) {
    if (following) following.abort();
    sessionStorage.removeItem(attemptKey);
    step('done', title);
    $('step-done').className = good ? 'done-good' : 'done-bad';
    $('done-text').textContent = text;
    $('again').hidden = good;
    say(`${title}.`); // the heading takes focus and the text follows it
  }

  /// A final step that is not an attempt's (no sale, no sign-in, closed, sold out): drawn again
  /// in another language too.
  function ending(titleKey, textKey, good = false) {
    redraw = () => ending(titleKey, textKey, good);
    finish(good, t(titleKey), t(textKey));
    $('again').hidden = true;
  }

  function prepareChoice() {
    if (!offer) return;
    const limit = Math.max(1, Math.min(offer.per_user_limit, offer.remaining || offer.per_user_limit));
    const seated = offer.stock_kind === 'seats';
    $('choose-quantity').hidden = seated;
    $('choose-seats').hidden = !seated;
    if (!seated) {
      $('quantity').max = String(limit);
      $('quantity-limit').textContent = t('upTo', limit);
      return;
    }
    $('seat-limit').textContent = t('upTo', limit);
    if (offer.layout_id) {
      seatMap.show(limit).catch(() => {});
      return;
    }
    const box = $('seats');
    if (box.childElementCount) return;
    for (const seat of offer.free_seats || []) {
      const label = document.createElement('label');
      const input = document.createElement('input');
      input.type = 'checkbox';
      input.name = 'seat';
      input.value = seat;
      label.append(input, ` ${seat}`);
      box.append(label);
    }
  }

  // ---- the seat map: a sale drawn from a venue layout ----------------------------------------

  const seatMap = (() => {
    const COLOURS = ['#0b57d0', '#c5221f', '#188038', '#e37400', '#8e24aa', '#00838f'];
    let layout = null;
    let drawn = false;
    let limit = 1;
    let zoom = 1;
    let stop = null; // stops following the map
    const chosen = new Set();
    const seats = new Map(); // id -> { el, state, label parts }

    function price(category) {
      const c = (offer.categories || []).find((x) => x.name === category);
      const amount = c ? c.unit_price : offer.unit_price;
      return amount == null ? '' : money(amount, offer.currency);
    }

    function label(seat) {
      const state = chosen.has(seat.id) ? t('seatChosen') : t(`seat${seat.state[0].toUpperCase()}${seat.state.slice(1)}`);
      return t('seatLabel', seat.section, seat.row, seat.number, price(seat.category), state);
    }

    function paint(seat) {
      seat.el.setAttribute('class', `${seat.state}${chosen.has(seat.id) ? ' chosen' : ''}`);
      seat.el.setAttribute('aria-checked', String(chosen.has(seat.id)));
      seat.el.setAttribute('aria-disabled', String(seat.state !== 'free'));
      seat.el.setAttribute('aria-label', label(seat));
    }

    function toggle(seat) {
      const why = { held: 'seatHeldWhy', sold: 'seatSoldWhy', off: 'seatOffWhy' }[seat.state];
      if (why && !chosen.has(seat.id)) { $('seat-why').textContent = t(why); return; }
      if (!chosen.has(seat.id) && chosen.size >= limit) { $('seat-why').textContent = t('seatLimitWhy', limit); return; }
      if (chosen.has(seat.id)) chosen.delete(seat.id); else chosen.add(seat.id);
      $('seat-why').textContent = '';
      paint(seat);
    }

    function draw() {
      const view = $('seat-map');
      const categories = [...new Set(layout.sections.flatMap((s) => s.rows.flatMap((r) => r.seats.map((x) => x.category))))];
      const svg = SeatMap.draw(layout, ({ id, el, section, row, seat }) => {
        el.setAttribute('fill', COLOURS[categories.indexOf(seat.category) % COLOURS.length]);
        const record = { id, el, state: 'free', section: section.name, row: row.id, number: seat.number, category: seat.category };
        seats.set(id, record);
        return record;
      }, toggle);
      view.replaceChildren(svg);
      $('seat-legend').textContent = categories.filter(Boolean)
        .map((c) => `${c} ${price(c)}`).join(' · ');
      drawn = true;
    }

    /// A seat's new state; a chosen seat someone else took is let go, and said.
    function set(id, state) {
      const seat = seats.get(id);
      if (!seat) return;
      seat.state = state;
      if (state !== 'free' && chosen.has(id)) {
        chosen.delete(id);
        $('seat-why').textContent = t('seatTakenNow', id);
      }
      paint(seat);
    }

    /// The whole map (`getSeatMap`, or a stream's `map` event), seat by seat.
    function apply(map) {
      SeatMap.eachState(layout, map, set);
    }

    /// The seats as they change: the sale's seat-map stream (the browser resumes it with its
    /// last id), or, without one, the map read every second.
    function follow() {
      if (window.EventSource) {
        const events = new EventSource(at(`/v1/public/sales/${saleId}/seat-map/events`));
        events.addEventListener('map', (e) => apply(JSON.parse(e.data).map));
        events.addEventListener('seats', (e) => {
          for (const change of JSON.parse(e.data).seats) set(change.seat, change.state);
        });
        return () => events.close();
      }
      const timer = setInterval(async () => {
        const res = await fetch(at(`/v1/public/sales/${saleId}/seat-map`)).catch(() => null);
        if (res && res.ok) apply(await res.json());
      }, 1000);
      return () => clearInterval(timer);
    }

    function setZoom(next) {
      zoom = Math.min(4, Math.max(1, next));
      const svg = $('seat-map').querySelector('svg');
      if (svg) svg.style.width = `${zoom * 100}%`;
    }
    $('zoom-in').addEventListener('click', () => setZoom(zoom * 1.5));
    $('zoom-out').addEventListener('click', () => setZoom(zoom / 1.5));

    /// Best available, offered first: how many together (up to the limit) and the category.
    function offerBest(categories) {
      const count = $('best-count');
      count.max = String(Math.min(limit, 20));
      if (Number(count.value) > limit) count.value = String(limit);
      const select = $('best-category');
      const any = select.options[0];
      any.textContent = t('anyCategory');
      select.replaceChildren(any, ...categories.filter(Boolean).map((c) => {
        const option = document.createElement('option');
        option.value = c;
        option.textContent = `${c} · ${price(c)}`;
        return option;
      }));
    }

    return {
      async show(max) {
        limit = max;
        $('seats').hidden = true;
        $('seat-map-box').hidden = false;
        if (!layout) {
          const res = await fetch(at(`/v1/public/layouts/${offer.layout_id}`));
          layout = await res.json();
        }
        if (!drawn) draw();
        offerBest([...new Set(layout.sections.flatMap((s) => s.rows.flatMap((r) => r.seats.map((x) => x.category))))]);
        for (const seat of seats.values()) paint(seat); // in the language now shown
        if (stop) return;
        stop = follow();
        // Followed while the buyer chooses; the step's end stops it.
        const watch = setInterval(() => {
          if (shownStep === 'admitted') return;
          clearInterval(watch);
          stop();
          stop = null;
        }, 1000);
      },
      chosen: () => [...chosen],
    };
  })();

  /// Problems the user can act on get their own words; the rest show the server's detail.
  function handleProblem(e) {
    if (!(e instanceof Problem)) { alertUser(t('connectionLost')); return; }
    switch (e.type) {
      case '/problems/sold-out':
        ending('soldOut', 'soldOutText');
        return;
      case '/problems/sale-closed':
        // Past its closing time (or closed by the shop) while the page offered to join.
        ending('saleClosed', 'saleClosedText');
        return;
      case '/problems/seat-taken':
        alertUser(t('seatTaken'));
        refreshOffer();
        return;
      case '/problems/no-adjacent-seats':
        alertUser(t('noAdjacent'));
        return;
      case '/problems/rejoin':
        sessionStorage.removeItem(attemptKey);
        attempt = null;
        redraw = null;
        step('join', t('joinAgainTitle'));
        alertUser(t('rejoinText'));
        return;
      case '/problems/not-in-phase':
      case '/problems/access-code': {
        const nextAt = e.body.next_phase_at;
        const next = nextAt && ((offer && offer.phases) || []).find((p) => Date.parse(p.starts_at) === Date.parse(nextAt));
        const now = phaseNow();
        alertUser(e.type === '/problems/access-code' ? t('codeRefused')
          : t('notInPhase', now ? now.name : '', next ? next.name : null, nextAt ? when(nextAt) : ''));
        return;
      }
      case '/problems/admission-expired':
        finish(false, t('timesUp'), t('reasons').admission_timeout);
        return;
      default:
        if (e.status === 429 || e.status >= 500) {
          say(t('busy', Math.max(1, e.retryAfter)));
          return;
        }
        alertUser(e.message);
    }
  }

  async function refreshOffer() {
    try {
      offer = await api('GET', `/v1/sales/${saleId}/offer`);
      $('sale-name').textContent = offer.name;
      $('seats').replaceChildren();
      prepareChoice();
      showLeft();
      lotteryTexts();
    } catch (e) { handleProblem(e); }
  }

  /// Runs `work` with the button disabled, retrying up to three times after a busy answer.
  async function act(button, work) {
    button.disabled = true;
    try {
      for (let attemptNo = 0; ; attemptNo++) {
        try {
          const next = await work();
          if (next) show(next);
          if (next && !ENDED.includes(next.state)) follow();
          return;
        } catch (e) {
          if (isTransient(e) && attemptNo < 3) {
            handleProblem(e);
            await sleep(backoff(e.retryAfter, attemptNo));
            continue;
          }
          handleProblem(e);
          return;
        }
      }
    } finally {
      button.disabled = false;
    }
  }

  // ---- the buttons -------------------------------------------------------------------------

  $('join').addEventListener('click', (ev) => act(ev.currentTarget, async () => {
    firstPosition = null;
    return join();
  }));
  $('again').addEventListener('click', () => {
    sessionStorage.removeItem(attemptKey);
    attempt = null;
    redraw = () => step('join', offer ? offer.name : t('join'));
    redraw();
    say('');
  });
  $('notify').addEventListener('click', () => askToNotify().catch(() => showNotify()));
  $('leave').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('DELETE', `/v1/attempts/${attempt.attempt_id}`)));
  $('hold-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const body = { admission_token: attempt.admission_token };
    if (offer && offer.stock_kind === 'seats') {
      body.seat_ids = offer.layout_id ? seatMap.chosen()
        : [...document.querySelectorAll('input[name=seat]:checked')].map((i) => i.value);
      if (!body.seat_ids.length) { alertUser(t('chooseSeat')); return; }
    } else {
      const n = Number($('quantity').value);
      const max = Number($('quantity').max);
      if (!Number.isInteger(n) || n < 1 || n > max) {
        alertUser(t('chooseBetween', max));
        $('quantity').focus();
        return;
      }
      body.quantity = n;
    }
    act($('hold'), () => api('POST', `/v1/attempts/${attempt.attempt_id}/hold`, body));
  });
  $('best-hold').addEventListener('click', (ev) => {
    const count = Number($('best-count').value);
    const max = Number($('best-count').max);
    if (!Number.isInteger(count) || count < 1 || count > max) {
      alertUser(t('chooseBetween', max));
      $('best-count').focus();
      return;
    }
    const best = { count };
    if ($('best-category').value) best.category = $('best-category').value;
    act(ev.currentTarget, () => api('POST', `/v1/attempts/${attempt.attempt_id}/hold`,
      { admission_token: attempt.admission_token, best_available: best }));
  });
  $('release').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('DELETE', `/v1/attempts/${attempt.attempt_id}/hold`)));
  $('checkout').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('POST', `/v1/attempts/${attempt.attempt_id}/checkout`)));
  for (const [id, outcome] of [['approve', 'approve'], ['decline', 'decline']]) {
    $(id).addEventListener('click', (ev) => act(ev.currentTarget, async () => {
      await api('POST', `/sandbox/payments/${attempt.payment.reference}`, { outcome });
      // The status stream may have pushed the outcome before this answer came: then it said so.
      if (ENDED.includes(attempt.state)) return null;
      say(outcome === 'approve' ? t('paymentSent') : t('declining'));
      follow();
      return null;
    }));
  }
  $('pay-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!formPay) return;
    act($('pay-form-pay'), async () => {
      const result = await formPay();
      if (result && result.error) {
        showFailure(result.error.message || String(result.error));
        return null;
      }
      if (ENDED.includes(attempt.state)) return null;
      say(t('paymentSent'));
      follow();
      return null;
    });
  });
  $('provider-window').addEventListener('submit', (ev) => {
    ev.preventDefault();
    act($('provider-pay'), async () => {
      if (!(await payInWindow(attempt))) return null;
      if (ENDED.includes(attempt.state)) return null;
      say(t('paymentSent'));
      follow();
      return null;
    });
  });
  $('language').addEventListener('change', (ev) => {
    lang = ev.currentTarget.value;
    localStorage.setItem('sluice.language', lang);
    translate();
    if (offer) $('sale-name').textContent = offer.name;
    if (redraw) redraw();
  });

  // ---- being told when the turn comes ---------------------------------------------------------

  // Asked once, on a click: the answer is remembered for every sale of this site.
  const NOTIFY_KEY = 'sluice.notify';
  const canNotify = () => 'Notification' in window;

  function duration(secs) {
    return secs < 60 ? t('seconds', secs) : t('minutesLong', Math.round(secs / 60));
  }

  /// While waiting: how long the user will have when the turn comes, and the offer to be told.
  function showNotify() {
    // A gate's line has nothing to choose: the turn leads straight back to the site.
    if (gateId) $('come-back').textContent = t('gateComeBack');
    else $('come-back').textContent = offer ? t('comeBack', duration(offer.admission_ttl_secs)) : '';
    const permission = canNotify() ? Notification.permission : 'unsupported';
    const on = permission === 'granted' && localStorage.getItem(NOTIFY_KEY) === '1';
    $('notify').hidden = !canNotify() || permission === 'denied' || on;
    const state = on ? t('notifyOn') : permission === 'denied' ? t('notifyBlocked') : '';
    $('notify-state').textContent = state;
    $('notify-state').hidden = !state;
  }

  async function askToNotify() {
    const permission = await Notification.requestPermission();
    if (permission === 'granted') {
      localStorage.setItem(NOTIFY_KEY, '1');
      // The page's own notification works without it (the tab must stay alive).
      subscribePush().catch(() => {});
    }
    showNotify();
  }

  /// Web Push, when this sluice sends it and the browser has it: the turn is told even with
  /// the tab suspended. The service worker shows it (sw.js).
  async function subscribePush() {
    if (!attempt || !('serviceWorker' in navigator) || !('PushManager' in window)) return;
    const res = await fetch(at('/v1/web-push/key'));
    if (!res.ok) return; // no Web Push here
    const { public_key: key } = await res.json();
    const registration = await navigator.serviceWorker.register(at('/waiting-room/sw.js'), { scope: at('/waiting-room/') });
    const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    await api('PUT', `/v1/attempts/${attempt.attempt_id}/web-push`, { ...subscription.toJSON(), lang });
  }

  /// The turn came while this page waited: a system notification (when allowed) and the tab's
  /// title flashing until the user is back.
  function tellTurn(next) {
    if (canNotify() && Notification.permission === 'granted' && localStorage.getItem(NOTIFY_KEY) === '1') {
      const secs = Math.max(0, Math.round((Date.parse(next.admission_expires_at) - Date.now()) / 1000));
      try {
        // Tagged with the attempt: the push message of the same turn is replaced, not doubled.
        const note = new Notification(t('yourTurn'), { body: t('turnNotice', duration(secs)), tag: next.attempt_id });
        note.onclick = () => { window.focus(); note.close(); };
      } catch (e) { /* a browser that shows notifications from service workers only */ }
    }
    if (flashing) return;
    let lit = false;
    flashing = setInterval(() => {
      lit = !lit;
      document.title = lit ? t('titleFlash') : titleNow;
    }, 1000);
    for (const event of ['focus', 'pointerdown', 'keydown']) window.addEventListener(event, stopFlashing, { once: true });
  }

  function stopFlashing() {
    if (!flashing) return;
    clearInterval(flashing);
    flashing = null;
    document.title = titleNow;
  }

  // ---- start -------------------------------------------------------------------------------

  /// The shop's name and logo (page.shop_name, page.logo_url), when configured.
  async function brand() {
    try {
      const res = await fetch(at('/waiting-room/brand.json'));
      const shop = await res.json();
      if (shop.name) { $('shop-name').textContent = shop.name; $('shop-name').hidden = false; }
      if (shop.logo_url) {
        $('logo').src = shop.logo_url;
        $('logo').alt = shop.name || '';
        $('logo').hidden = false;
      }
    } catch (e) { /* unbranded */ }
  }

  async function start() {
    translate();
    brand();
    if (gateId) {
      try {
        await enterGate();
      } catch (e) {
        ending('notAvailable', e.status === 404 ? 'noSuchSale' : 'ended');
        return;
      }
    }
    if (!saleId || !token) {
      ending('openFromShop', 'openFromShopText');
      return;
    }
    try {
      offer = await api('GET', `/v1/sales/${saleId}/offer`);
    } catch (e) {
      ending('notAvailable', e.status === 404 ? 'noSuchSale' : 'ended');
      return;
    }
    $('sale-name').textContent = offer.name;
    lotteryTexts();
    const known = sessionStorage.getItem(attemptKey);
    if (known) {
      try {
        show(await api('GET', `/v1/attempts/${known}`));
        if (!ENDED.includes(attempt.state)) follow();
        return;
      } catch (e) {
        sessionStorage.removeItem(attemptKey);
      }
    }
    if (offer.status === 'closed') {
      ending('saleClosed', 'saleEnded');
      return;
    }
    redraw = () => { step('join', offer.name); showLeft(); };
    redraw();
    // A gate's visitor came for the site, not for a sale: in line at once.
    if (gateId) act($('join'), () => join());
    // What is left, kept current while the visitor waits to join or waits in line.
    setInterval(() => {
      if (shownStep === 'join' || shownStep === 'queued') refreshOffer();
    }, 10000);
  }

  start();
})();
