// The waiting room: join a sale, follow your place live, then hold, pay and see the outcome.
//
// Reads `?sale=<id>` and the user's token from `#token=<JWT>` (kept in sessionStorage and
// removed from the address bar, so it is neither shared nor logged). Status comes over
// Server-Sent Events, read with fetch so the token travels in the Authorization header; if the
// stream cannot be opened or drops, the page polls, waiting `poll_after_ms` as the server asks.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const saleId = params.get('sale');
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get('token')) {
    sessionStorage.setItem('sluice.token', fragment.get('token'));
    history.replaceState(null, '', location.pathname + location.search);
  }
  const token = sessionStorage.getItem('sluice.token');
  const attemptKey = `sluice.attempt.${saleId}`;
  const STEPS = ['join', 'queued', 'admitted', 'held', 'paying', 'done'];
  const ENDED = ['CONFIRMED', 'EXPIRED'];

  let offer = null;
  let attempt = null;
  let firstPosition = null;
  let following = null; // AbortController of the live status
  let shownStep = null;

  // ---- talking to sluice -------------------------------------------------------------------

  class Problem extends Error {
    constructor(status, body, retryAfter) {
      super(body.detail || body.title || `HTTP ${status}`);
      this.status = status;
      this.type = body.type || '';
      this.retryAfter = retryAfter;
    }
  }

  async function api(method, path, body) {
    const res = await fetch(path, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body ? { 'Content-Type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await res.json().catch(() => ({}));
    if (!res.ok) {
      throw new Problem(res.status, json, Number(res.headers.get('Retry-After') || 0));
    }
    return json;
  }

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

  async function stream(signal) {
    const res = await fetch(`/v1/attempts/${attempt.attempt_id}/events`, {
      headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' },
      signal,
    });
    if (!res.ok || !res.body) {
      const json = await res.json().catch(() => ({}));
      throw new Problem(res.status, json, Number(res.headers.get('Retry-After') || 0));
    }
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
        const data = event.split('\n').filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart()).join('\n');
        if (data) show(JSON.parse(data));
      }
    }
  }

  /// One round of polling (used while the stream is down), then back to trying the stream.
  async function poll(signal) {
    for (let i = 0; i < 5 && !signal.aborted; i++) {
      const wait = attempt ? attempt.poll_after_ms : 2000;
      await sleep(Math.max(500, wait));
      if (signal.aborted) return;
      try {
        show(await api('GET', `/v1/attempts/${attempt.attempt_id}`));
      } catch (e) {
        handleProblem(e);
        if (!isTransient(e)) return;
      }
      if (ENDED.includes(attempt.state)) return;
    }
  }

  const isTransient = (e) => e instanceof Problem && (e.status === 429 || e.status >= 500);

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
    if (shownStep !== name) {
      shownStep = name;
      document.title = `${title} — ${offer ? offer.name : 'Waiting room'}`;
      $('title').focus(); // keyboard and screen-reader users land on the new step
    }
  }

  /// The wait in a few characters, for the figure box.
  function shortWait(secs) {
    if (secs == null) return '–';
    return secs < 60 ? '< 1 min' : `~${Math.round(secs / 60)} min`;
  }

  function minutes(secs) {
    if (secs == null) return '–';
    if (secs < 60) return 'under a minute';
    const m = Math.round(secs / 60);
    return m === 1 ? 'about 1 minute' : `about ${m} minutes`;
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

  const REASONS = {
    left: 'You left the queue.',
    abandoned: 'Your place lapsed because this page was closed for too long.',
    admission_timeout: 'Your turn passed before you chose, so the tickets went to the next person in line.',
    hold_timeout: 'Your hold ran out and the tickets went back on sale.',
    released: 'You released your tickets; they are back on sale.',
    payment_failed: 'The payment did not go through. Nothing was charged and the tickets went back on sale.',
    payment_timeout: 'The payment took too long, so the tickets went back on sale.',
    sale_closed: 'The sale closed before your turn came. Nothing was charged.',
  };

  function describeHold(hold) {
    if (!hold) return '';
    if (hold.seat_ids && hold.seat_ids.length) return `Seats ${hold.seat_ids.join(', ')}`;
    return hold.quantity === 1 ? '1 ticket' : `${hold.quantity} tickets`;
  }

  function show(next) {
    attempt = next;
    sessionStorage.setItem(attemptKey, next.attempt_id);
    alertUser('');
    switch (next.state) {
      case 'QUEUED': {
        if (next.sold_out) {
          // Nothing left and nothing held that could come back: say so now, not at the turn,
          // and give the place up (a failed leave changes nothing for the user).
          api('DELETE', `/v1/attempts/${next.attempt_id}`).catch(() => {});
          finish(false, 'Sold out', 'Sorry — everything was sold while you waited, and nothing held can come back. Nothing was charged.');
          $('again').hidden = true;
          break;
        }
        if (firstPosition == null || next.position > firstPosition) firstPosition = next.position;
        step('queued', "You're in line");
        $('position').textContent = next.position ?? '–';
        $('waiting').textContent = next.waiting ?? '–';
        $('eta').textContent = shortWait(next.estimated_wait_secs);
        const done = firstPosition > 1 ? (firstPosition - next.position) / (firstPosition - 1) : 0;
        $('progress').value = Math.round(done * 100);
        say(`You are number ${next.position} in line. Estimated wait: ${minutes(next.estimated_wait_secs)}.`);
        break;
      }
      case 'ADMITTED':
        step('admitted', "It's your turn");
        prepareChoice();
        countdown('admission-countdown', next.admission_expires_at);
        say('It is your turn. Choose your tickets and hold them before the time runs out.');
        break;
      case 'HOLD':
        step('held', 'Held for you');
        $('held-what').textContent = `${describeHold(next.hold)} held for you. Go to payment to keep them.`;
        countdown('hold-countdown', next.hold && next.hold.expires_at);
        say(`${describeHold(next.hold)} held. Go to payment before the time runs out.`);
        break;
      case 'PAYMENT_PENDING':
        step('paying', 'Payment');
        $('paying-what').textContent = `Paying for ${describeHold(next.hold).toLowerCase()}.`;
        $('sandbox').hidden = !(next.payment && next.payment.sandbox_url);
        countdown('payment-countdown', next.payment && next.payment.expires_at);
        say('Waiting for your payment.');
        break;
      case 'CONFIRMED':
        finish(true, 'Confirmed', `${describeHold(next.hold)} — they are yours. A confirmation is on its way.`);
        break;
      case 'EXPIRED':
        finish(false, next.reason === 'left' ? 'You left' : "Time's up",
          REASONS[next.reason] || 'This attempt has ended.');
        break;
    }
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

  function prepareChoice() {
    if (!offer) return;
    const limit = Math.max(1, Math.min(offer.per_user_limit, offer.remaining || offer.per_user_limit));
    const seated = offer.stock_kind === 'seats';
    $('choose-quantity').hidden = seated;
    $('choose-seats').hidden = !seated;
    if (!seated) {
      $('quantity').max = String(limit);
      $('quantity-limit').textContent = `(up to ${limit})`;
      return;
    }
    $('seat-limit').textContent = `(up to ${limit})`;
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

  /// Problems the user can act on get their own words; the rest show the server's detail.
  function handleProblem(e) {
    if (!(e instanceof Problem)) { alertUser('Connection lost. Trying again…'); return; }
    switch (e.type) {
      case '/problems/sold-out':
        finish(false, 'Sold out', 'Sorry — everything has been sold. Nothing was charged.');
        $('again').hidden = true;
        return;
      case '/problems/sale-closed':
        // Past its closing time (or closed by the shop) while the page offered to join.
        finish(false, 'Sale closed', 'This sale takes no more joins. Nothing was charged.');
        $('again').hidden = true;
        return;
      case '/problems/seat-taken':
        alertUser('One of those seats was just taken. Please choose another.');
        refreshOffer();
        return;
      case '/problems/rejoin':
        sessionStorage.removeItem(attemptKey);
        attempt = null;
        step('join', 'Please join again');
        alertUser('The waiting room was restarted and places were lost. Join again to get a new place.');
        return;
      case '/problems/admission-expired':
        finish(false, "Time's up", REASONS.admission_timeout);
        return;
      default:
        if (e.status === 429 || e.status >= 500) {
          say(`Busy — trying again in ${Math.max(1, e.retryAfter)} seconds.`);
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
    } catch (e) { handleProblem(e); }
  }

  /// Runs `work` with the button disabled, retrying once after Retry-After on a busy answer.
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
            await sleep(Math.max(1, e.retryAfter) * 1000);
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
    return api('POST', `/v1/sales/${saleId}/attempts`);
  }));
  $('again').addEventListener('click', () => {
    sessionStorage.removeItem(attemptKey);
    attempt = null;
    step('join', offer ? offer.name : 'Join the queue');
    say('');
  });
  $('leave').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('DELETE', `/v1/attempts/${attempt.attempt_id}`)));
  $('hold-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const body = { admission_token: attempt.admission_token };
    if (offer && offer.stock_kind === 'seats') {
      body.seat_ids = [...document.querySelectorAll('input[name=seat]:checked')].map((i) => i.value);
      if (!body.seat_ids.length) { alertUser('Choose at least one seat.'); return; }
    } else {
      const n = Number($('quantity').value);
      const max = Number($('quantity').max);
      if (!Number.isInteger(n) || n < 1 || n > max) {
        alertUser(`Choose between 1 and ${max} tickets.`);
        $('quantity').focus();
        return;
      }
      body.quantity = n;
    }
    act($('hold'), () => api('POST', `/v1/attempts/${attempt.attempt_id}/hold`, body));
  });
  $('release').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('DELETE', `/v1/attempts/${attempt.attempt_id}/hold`)));
  $('checkout').addEventListener('click', (ev) => act(ev.currentTarget,
    () => api('POST', `/v1/attempts/${attempt.attempt_id}/checkout`)));
  for (const [id, outcome] of [['approve', 'approve'], ['decline', 'decline']]) {
    $(id).addEventListener('click', (ev) => act(ev.currentTarget, async () => {
      await api('POST', `/sandbox/payments/${attempt.payment.reference}`, { outcome });
      say(outcome === 'approve' ? 'Payment sent. Waiting for confirmation…' : 'Declining…');
      follow();
      return null;
    }));
  }

  // ---- start -------------------------------------------------------------------------------

  async function start() {
    if (!saleId || !token) {
      step('done', 'Open this page from the shop');
      $('done-text').textContent = 'This page needs a sale and your sign-in; the shop links here with both.';
      return;
    }
    try {
      offer = await api('GET', `/v1/sales/${saleId}/offer`);
    } catch (e) {
      step('done', 'Sale not available');
      $('done-text').textContent = e.status === 404 ? 'There is no such sale.' : e.message;
      return;
    }
    $('sale-name').textContent = offer.name;
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
      step('done', 'Sale closed');
      $('done-text').textContent = 'This sale has ended.';
      return;
    }
    step('join', offer.name);
    say(offer.remaining > 0 ? '' : 'Everything is held or sold right now; you can still join in case tickets come back.');
  }

  start();
})();
