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
// attempt (screen.js, a pure function of the page's one state object, which this file draws)
// and each payment provider's way to pay
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
  const gateId = params.get('gate');
  const returnTo = params.get('return_to');
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get('token')) {
    sessionStorage.setItem('sluice.token', fragment.get('token'));
    history.replaceState(null, '', location.pathname + location.search);
  }
  const MESSAGES = { en, ko };

  /// What the page knows, in one place: whom it is for, the sale's offer and the attempt as
  /// sluice last answered them, and what is on screen. `screenOf` (screen.js) decides each step
  /// from it; the handlers below change it.
  const state = {
    saleId: params.get('sale'),
    /// The user's token (a gate's visitor gets one on entering the gate).
    token: gateId ? null : sessionStorage.getItem('sluice.token'),
    /// A gate's visitor's user id (as entering the gate answered it): what the proof of work is
    /// bound to.
    visitorUser: '',
    /// Where this tab keeps the sale's attempt id, so a reload finds it.
    attemptKey: `sluice.attempt.${params.get('sale')}`,
    lang: languageOf(MESSAGES, localStorage.getItem('sluice.language'), document.documentElement.lang),
    offer: null,
    attempt: null,
    /// The place first shown, against which the progress through the line is measured.
    firstPosition: null,
    /// The AbortController of the live status.
    following: null,
    shownStep: null,
    /// Draws the step on screen again (after a change of language).
    redraw: null,
    /// The tab's title for the step on screen.
    titleNow: '',
    /// The timer flashing the tab's title when the turn came.
    flashing: null,
    /// Of the status stream: a reconnect is not sent the same answer again.
    lastEventId: null,
    /// The key of the payment form on the page.
    formMounted: null,
    /// The mounting under way: answers that arrive meanwhile wait for it.
    formMounting: null,
    /// Confirms the payment with what the buyer entered.
    formPay: null,
    /// The admission is being traded for the site's session (a gate's visitor).
    trading: false,
  };

  // Back from a payment provider's window (`?attempt=`): that attempt is the one to show, even
  // if this page, ending as it left, had let go of it.
  if (params.get('attempt')) {
    sessionStorage.setItem(state.attemptKey, params.get('attempt'));
    params.delete('attempt');
    history.replaceState(null, '', `${location.pathname}?${params}`);
  }
  const STEPS = ['join', 'challenge', 'proving', 'queued', 'admitted', 'held', 'paying', 'done'];
  const ENDED = ['CONFIRMED', 'EXPIRED'];

  // ---- the visitor's language ----------------------------------------------------------------

  const t = translator(MESSAGES, () => state.lang);

  /// The page's fixed texts in the language; the step on screen is drawn again by the caller.
  function translate() {
    document.documentElement.lang = state.lang;
    for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
    for (const el of document.querySelectorAll('[data-i18n-label]')) el.setAttribute('aria-label', t(el.dataset.i18nLabel));
    $('language').value = state.lang;
    lotteryTexts();
  }

  /// A lottery sale before its opening: the order is drawn then, so joining early gives no
  /// advantage, and the place shown until then is not yet the one that counts.
  function lotteryTexts() {
    // A later lottery phase's pre-queue is drawn at that phase's start; else the sale's opening.
    const phase = phaseNow();
    const [opening, drawAt] = phase && phase.joins_from ? [phase.opening, phase.starts_at]
      : [state.offer && state.offer.opening, state.offer && state.offer.opens_at];
    const ahead = opening === 'lottery_at_open' && Date.now() < Date.parse(drawAt);
    const at = ahead ? new Date(drawAt).toLocaleTimeString(state.lang, { hour: '2-digit', minute: '2-digit' }) : '';
    $('join-intro').textContent = ahead ? t('joinIntroLottery', at) : t('joinIntro');
    $('lottery-note').textContent = ahead ? t('lotteryNote', at) : '';
    $('lottery-note').hidden = !ahead;
  }

  // ---- talking to sluice -------------------------------------------------------------------

  const api = client(() => state.token);

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  /// Follows the attempt until it ends: SSE first, polling when the stream is unavailable.
  async function follow() {
    if (state.following) state.following.abort();
    const control = new AbortController();
    state.following = control;
    while (!control.signal.aborted && state.attempt && !ENDED.includes(state.attempt.state)) {
      try {
        await stream(control.signal);
      } catch (e) {
        if (control.signal.aborted) return;
        if (e instanceof Problem) { handleProblem(e); if (!isTransient(e)) return; }
      }
      if (control.signal.aborted || !state.attempt || ENDED.includes(state.attempt.state)) return;
      await poll(control.signal);
    }
  }

  /// The attempt's status path; with its queue ticket the answer comes from the server's view
  /// of the queue, without a lookup in the queue store.
  function statusPath(suffix = '') {
    const ticket = state.attempt.queue_ticket ? `?ticket=${encodeURIComponent(state.attempt.queue_ticket)}` : '';
    return `/v1/attempts/${state.attempt.attempt_id}${suffix}${ticket}`;
  }

  async function stream(signal) {
    const headers = { Authorization: `Bearer ${state.token}`, Accept: 'text/event-stream' };
    if (state.lastEventId) headers['Last-Event-ID'] = state.lastEventId;
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
        if (id) state.lastEventId = id.slice(3).trim();
        if (data) show(JSON.parse(data));
      }
    }
  }

  /// One round of polling (used while the stream is down), then back to trying the stream.
  async function poll(signal) {
    for (let i = 0; i < 5 && !signal.aborted; i++) {
      await sleep(pollDelay(state.attempt));
      if (signal.aborted) return;
      try {
        show(await api('GET', statusPath()));
      } catch (e) {
        handleProblem(e);
        if (!isTransient(e)) return;
      }
      if (ENDED.includes(state.attempt.state)) return;
    }
  }


  /// The user id the token names (`sub`): the proof of work is bound to it.
  function tokenUser() {
    if (state.visitorUser) return state.visitorUser;
    try {
      const payload = state.token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
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
      worker.postMessage({ salt: pow.salt, sale: state.saleId, user: tokenUser(), bits: pow.difficulty_bits });
    });
  }

  /// Joins, with the sale's proof of work when it asks for one (again if it was raised since).
  async function join() {
    for (let round = 0; round < 3; round++) {
      const pow = state.offer && state.offer.proof_of_work;
      const headers = pow ? { 'Sluice-Proof-Of-Work': await prove(pow) } : {};
      const code = $('access-code').value.trim();
      if (code) headers['Sluice-Access-Code'] = code;
      try {
        return await api('POST', `/v1/sales/${state.saleId}/attempts`, undefined, headers);
      } catch (e) {
        if (e.type !== '/problems/proof-of-work-required') throw e;
        state.offer = await api('GET', `/v1/sales/${state.saleId}/offer`); // a new difficulty or salt
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
    state.titleNow = `${title} — ${state.offer ? state.offer.name : t('waitingRoom')}`;
    if (name !== 'admitted') stopFlashing();
    if (!state.flashing) document.title = state.titleNow;
    if (state.shownStep !== name) {
      state.shownStep = name;
      $('title').focus(); // keyboard and screen-reader users land on the new step
    }
  }

  /// A time of today or another day, in the visitor's language.
  function when(iso) {
    const d = new Date(iso);
    const sameDay = d.toDateString() === new Date().toDateString();
    return sameDay ? d.toLocaleTimeString(state.lang, { hour: '2-digit', minute: '2-digit' })
      : d.toLocaleString(state.lang, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  }

  /// The sale's phase joins follow now (the first before the opening), if it has phases.
  function phaseNow() {
    const phases = (state.offer && state.offer.phases) || [];
    let current = phases[0] || null;
    for (const p of phases) if (Date.parse(p.joins_from || p.starts_at) <= Date.now()) current = p;
    return current;
  }

  /// The join step's timeline of phases, and the access code field when the phase running
  /// now lets in holders of codes.
  function showPhases() {
    const phases = (state.offer && state.offer.phases) || [];
    $('phases-note').hidden = phases.length < 2;
    $('phases-note').textContent = phases.map((p) => t('phaseFrom', p.name, when(p.starts_at))).join(' · ');
    const now = phaseNow();
    $('access-code-field').hidden = !(now && now.audience === 'codes');
  }

  /// What is left, when the offer knows it, on the steps before the turn.
  function showLeft() {
    showPhases();
    // A gate's line holds no stock: nothing is left or sold out.
    const known = !gateId && state.offer && typeof state.offer.remaining === 'number';
    for (const id of ['join-left', 'queued-left']) {
      $(id).hidden = !known;
      if (known) $(id).textContent = state.offer.remaining > 0 ? t('left', state.offer.remaining) : t('leftNone');
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
  const money = (amount, currency) => moneyIn(amount, currency, state.lang);

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

  /// Mounts the provider's payment form for the attempt (what it needs comes with checkout's
  /// answer; a page opened later asks checkout again, which answers the same payment).
  function mountForm(next, way) {
    state.formMounting ??= mountFormOnce(next, way).finally(() => { state.formMounting = null; });
    return state.formMounting;
  }

  async function mountFormOnce(next, way) {
    if (!next.payment.pay && state.formMounted) return;
    const pay = await payWith(next, api);
    if (!pay || state.formMounted === way.formKey(pay)) return;
    state.formPay = await way.mount(pay, $('pay-form-element'), { lang: state.lang, loadScript });
    state.formMounted = way.formKey(pay);
  }

  /// Opens the provider's payment window for the attempt. Some send the buyer back to sluice,
  /// which confirms and brings them back here; others answer here, and report to sluice by
  /// their webhook. Whether it was paid here.
  async function payInWindow(next) {
    const way = await wayToPay(next.payment.provider);
    const pay = await payWith(next, api);
    if (!way || !pay) return false;
    const { paid, failure } = await way.open(pay, { lang: state.lang, loadScript });
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
    const known = code && MESSAGES[state.lang].providerErrors[code[1]];
    $('payment-failure').textContent = t('lastFailure', known ? `${known} (${code[1]})` : failure);
  }

  // ---- in front of a site -------------------------------------------------------------------

  /// Enters the gate as its visitor: the browser's visitor if it is one already (its cookie),
  /// else a new one. The visitor's token then joins and follows the gate's line.
  async function enterGate() {
    const entry = await api('GET', `/v1/gates/${gateId}/entry`);
    state.saleId = entry.sale_id;
    state.attemptKey = `sluice.attempt.${state.saleId}`;
    let visitor;
    try {
      // A browser that is a visitor already (its cookie) needs no challenge again.
      visitor = await api('POST', `/v1/gates/${gateId}/visitors`, {});
    } catch (e) {
      if (!(e instanceof Problem) || e.type !== '/problems/challenge-failed' || !entry.script_url) throw e;
      const answer = await solveChallenge(entry);
      visitor = await api('POST', `/v1/gates/${gateId}/visitors`, { challenge_answer: answer });
    }
    state.token = visitor.token;
    state.visitorUser = visitor.user_id;
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

  /// The visitor's turn: the admission becomes the site's session, and the visitor goes back
  /// to the page first asked for (the address replaced: Back does not return to the line).
  async function tradeAdmission(next) {
    if (state.trading) return;
    state.trading = true;
    try {
      const session = await api('POST', `/v1/gates/${gateId}/session`, {
        attempt_id: next.attempt_id,
        admission_token: next.admission_token,
        return_to: returnTo,
      });
      sessionStorage.removeItem(state.attemptKey);
      location.replace(session.location);
    } catch (e) {
      state.trading = false;
      handleProblem(e);
    }
  }

  /// Draws `next` as `screenOf` (screen.js) decides it, and does what the step asks besides.
  function show(next) {
    if (gateId && next.state === 'ADMITTED' && next.admission_token) tradeAdmission(next);
    const screen = screenOf(next, { before: state.attempt, firstPosition: state.firstPosition, t, money });
    state.attempt = next;
    state.firstPosition = screen.firstPosition;
    sessionStorage.setItem(state.attemptKey, next.attempt_id);
    alertUser('');
    state.redraw = () => show(state.attempt);
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
    if (state.following) state.following.abort();
    sessionStorage.removeItem(state.attemptKey);
    step('done', title);
    $('step-done').className = good ? 'done-good' : 'done-bad';
    $('done-text').textContent = text;
    $('again').hidden = good;
    say(`${title}.`); // the heading takes focus and the text follows it
  }

  /// A final step that is not an attempt's (no sale, no sign-in, closed, sold out): drawn again
  /// in another language too.
  function ending(titleKey, textKey, good = false) {
    state.redraw = () => ending(titleKey, textKey, good);
    finish(good, t(titleKey), t(textKey));
    $('again').hidden = true;
  }

  function prepareChoice() {
    if (!state.offer) return;
    const limit = Math.max(1, Math.min(state.offer.per_user_limit, state.offer.remaining || state.offer.per_user_limit));
    const seated = state.offer.stock_kind === 'seats';
    $('choose-quantity').hidden = seated;
    $('choose-seats').hidden = !seated;
    if (!seated) {
      $('quantity').max = String(limit);
      $('quantity-limit').textContent = t('upTo', limit);
      return;
    }
    $('seat-limit').textContent = t('upTo', limit);
    if (state.offer.layout_id) {
      seatMap.show(limit).catch(() => {});
      return;
    }
    const box = $('seats');
    if (box.childElementCount) return;
    for (const seat of state.offer.free_seats || []) {
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
      const c = (state.offer.categories || []).find((x) => x.name === category);
      const amount = c ? c.unit_price : state.offer.unit_price;
      return amount == null ? '' : money(amount, state.offer.currency);
    }

    function label(seat) {
      const said = chosen.has(seat.id) ? t('seatChosen') : t(`seat${seat.state[0].toUpperCase()}${seat.state.slice(1)}`);
      return t('seatLabel', seat.section, seat.row, seat.number, price(seat.category), said);
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
    function set(id, now) {
      const seat = seats.get(id);
      if (!seat) return;
      seat.state = now;
      if (now !== 'free' && chosen.has(id)) {
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
        const events = new EventSource(at(`/v1/public/sales/${state.saleId}/seat-map/events`));
        events.addEventListener('map', (e) => apply(JSON.parse(e.data).map));
        events.addEventListener('seats', (e) => {
          for (const change of JSON.parse(e.data).seats) set(change.seat, change.state);
        });
        return () => events.close();
      }
      const timer = setInterval(async () => {
        const res = await fetch(at(`/v1/public/sales/${state.saleId}/seat-map`)).catch(() => null);
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
          const res = await fetch(at(`/v1/public/layouts/${state.offer.layout_id}`));
          layout = await res.json();
        }
        if (!drawn) draw();
        offerBest([...new Set(layout.sections.flatMap((s) => s.rows.flatMap((r) => r.seats.map((x) => x.category))))]);
        for (const seat of seats.values()) paint(seat); // in the language now shown
        if (stop) return;
        stop = follow();
        // Followed while the buyer chooses; the step's end stops it.
        const watch = setInterval(() => {
          if (state.shownStep === 'admitted') return;
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
        sessionStorage.removeItem(state.attemptKey);
        state.attempt = null;
        state.redraw = null;
        step('join', t('joinAgainTitle'));
        alertUser(t('rejoinText'));
        return;
      case '/problems/not-in-phase':
      case '/problems/access-code': {
        const nextAt = e.body.next_phase_at;
        const next = nextAt && ((state.offer && state.offer.phases) || []).find((p) => Date.parse(p.starts_at) === Date.parse(nextAt));
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
      state.offer = await api('GET', `/v1/sales/${state.saleId}/offer`);
      $('sale-name').textContent = state.offer.name;
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
    state.firstPosition = null;
    return join();
  }));
  $('again').addEventListener('click', () => {
    sessionStorage.removeItem(state.attemptKey);
    state.attempt = null;
    state.redraw = () => step('join', state.offer ? state.offer.name : t('join'));
    state.redraw();
    say('');
  });
  $('notify').addEventListener('click', () => askToNotify().catch(() => showNotify()));
  $('leave').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('DELETE', `/v1/attempts/${state.attempt.attempt_id}`)));
  $('hold-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const body = { admission_token: state.attempt.admission_token };
    if (state.offer && state.offer.stock_kind === 'seats') {
      body.seat_ids = state.offer.layout_id ? seatMap.chosen()
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
    act($('hold'), () => api('POST', `/v1/attempts/${state.attempt.attempt_id}/hold`, body));
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
    act(ev.currentTarget, () => api('POST', `/v1/attempts/${state.attempt.attempt_id}/hold`,
      { admission_token: state.attempt.admission_token, best_available: best }));
  });
  $('release').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('DELETE', `/v1/attempts/${state.attempt.attempt_id}/hold`)));
  $('checkout').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('POST', `/v1/attempts/${state.attempt.attempt_id}/checkout`)));
  for (const [id, outcome] of [['approve', 'approve'], ['decline', 'decline']]) {
    $(id).addEventListener('click', (ev) => act(ev.currentTarget, async () => {
      await api('POST', `/sandbox/payments/${state.attempt.payment.reference}`, { outcome });
      // The status stream may have pushed the outcome before this answer came: then it said so.
      if (ENDED.includes(state.attempt.state)) return null;
      say(outcome === 'approve' ? t('paymentSent') : t('declining'));
      follow();
      return null;
    }));
  }
  $('pay-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!state.formPay) return;
    act($('pay-form-pay'), async () => {
      const result = await state.formPay();
      if (result && result.error) {
        showFailure(result.error.message || String(result.error));
        return null;
      }
      if (ENDED.includes(state.attempt.state)) return null;
      say(t('paymentSent'));
      follow();
      return null;
    });
  });
  $('provider-window').addEventListener('submit', (ev) => {
    ev.preventDefault();
    act($('provider-pay'), async () => {
      if (!(await payInWindow(state.attempt))) return null;
      if (ENDED.includes(state.attempt.state)) return null;
      say(t('paymentSent'));
      follow();
      return null;
    });
  });
  $('language').addEventListener('change', (ev) => {
    state.lang = ev.currentTarget.value;
    localStorage.setItem('sluice.language', state.lang);
    translate();
    if (state.offer) $('sale-name').textContent = state.offer.name;
    if (state.redraw) state.redraw();
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
    else $('come-back').textContent = state.offer ? t('comeBack', duration(state.offer.admission_ttl_secs)) : '';
    const permission = canNotify() ? Notification.permission : 'unsupported';
    const on = permission === 'granted' && localStorage.getItem(NOTIFY_KEY) === '1';
    $('notify').hidden = !canNotify() || permission === 'denied' || on;
    const told = on ? t('notifyOn') : permission === 'denied' ? t('notifyBlocked') : '';
    $('notify-state').textContent = told;
    $('notify-state').hidden = !told;
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
    if (!state.attempt || !('serviceWorker' in navigator) || !('PushManager' in window)) return;
    const res = await fetch(at('/v1/web-push/key'));
    if (!res.ok) return; // no Web Push here
    const { public_key: key } = await res.json();
    const registration = await navigator.serviceWorker.register(at('/waiting-room/sw.js'), { scope: at('/waiting-room/') });
    const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    await api('PUT', `/v1/attempts/${state.attempt.attempt_id}/web-push`, { ...subscription.toJSON(), lang: state.lang });
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
    if (state.flashing) return;
    let lit = false;
    state.flashing = setInterval(() => {
      lit = !lit;
      document.title = lit ? t('titleFlash') : state.titleNow;
    }, 1000);
    for (const event of ['focus', 'pointerdown', 'keydown']) window.addEventListener(event, stopFlashing, { once: true });
  }

  function stopFlashing() {
    if (!state.flashing) return;
    clearInterval(state.flashing);
    state.flashing = null;
    document.title = state.titleNow;
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
    if (!state.saleId || !state.token) {
      ending('openFromShop', 'openFromShopText');
      return;
    }
    try {
      state.offer = await api('GET', `/v1/sales/${state.saleId}/offer`);
    } catch (e) {
      ending('notAvailable', e.status === 404 ? 'noSuchSale' : 'ended');
      return;
    }
    $('sale-name').textContent = state.offer.name;
    lotteryTexts();
    const known = sessionStorage.getItem(state.attemptKey);
    if (known) {
      try {
        show(await api('GET', `/v1/attempts/${known}`));
        if (!ENDED.includes(state.attempt.state)) follow();
        return;
      } catch (e) {
        sessionStorage.removeItem(state.attemptKey);
      }
    }
    if (state.offer.status === 'closed') {
      ending('saleClosed', 'saleEnded');
      return;
    }
    state.redraw = () => { step('join', state.offer.name); showLeft(); };
    state.redraw();
    // A gate's visitor came for the site, not for a sale: in line at once.
    if (gateId) act($('join'), () => join());
    // What is left, kept current while the visitor waits to join or waits in line.
    setInterval(() => {
      if (state.shownStep === 'join' || state.shownStep === 'queued') refreshOffer();
    }, 10000);
  }

  start();
})();
