// The waiting room: join a sale, follow your place live, then hold, pay and see the outcome.
//
// Reads `?sale=<id>` and the user's token from `#token=<JWT>` (kept in sessionStorage and
// removed from the address bar, so it is neither shared nor logged). Status comes over
// Server-Sent Events, read with fetch so the token travels in the Authorization header; if the
// stream cannot be opened or drops, the page polls, waiting `poll_after_ms` as the server asks.
// It speaks the visitor's language (English and Korean: the server picks from Accept-Language
// and sets <html lang>; the switch overrides it, remembered in localStorage), and solves a
// sale's proof of work in a Web Worker (proof-of-work.js) before it joins.
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
  // Back from a payment provider's window (`?attempt=`): that attempt is the one to show, even
  // if this page, ending as it left, had let go of it.
  if (params.get('attempt')) {
    sessionStorage.setItem(attemptKey, params.get('attempt'));
    params.delete('attempt');
    history.replaceState(null, '', `${location.pathname}?${params}`);
  }
  const STEPS = ['join', 'proving', 'queued', 'admitted', 'held', 'paying', 'done'];
  const ENDED = ['CONFIRMED', 'EXPIRED'];
  const WINDOWS = ['toss', 'portone']; // providers that take the payment in a window of theirs

  // ---- the visitor's language ----------------------------------------------------------------

  const MESSAGES = {
    en: {
      language: 'Language', waitingRoom: 'Waiting room', loading: 'Loading…',
      joinIntro: 'Tickets go on sale to everyone in the queue in the order they joined. Join once: keep this page open and we will let you in when it is your turn.',
      joinIntroLottery: (at) => `The order of the queue is drawn by lot when the sale opens at ${at}: joining any time before then gives the same chance. Join once: keep this page open and we will let you in when it is your turn.`,
      lotteryNote: (at) => `The order is drawn by lot when the sale opens at ${at}. Until then your place is only the order in which people joined, not the one that counts.`,
      join: 'Join the queue',
      provingIntro: 'This sale asks every browser for a moment of work before it joins, so that bots cannot take the places of people. It runs by itself; keep this page open.',
      provingProgress: 'Checking this browser', proving: 'Checking this browser',
      provingSay: (p) => `Checking this browser before joining: ${p}% done.`,
      yourPlace: 'Your place', peopleWaiting: 'People waiting', estimatedWait: 'Estimated wait',
      queueProgress: 'Progress through the queue',
      keepOpen: 'Keep this page open. You will be let in automatically — no need to refresh.',
      leave: 'Leave the queue', howMany: 'How many tickets?', chooseSeats: 'Choose your seats',
      chooseWithin: 'Choose within', hold: 'Hold my tickets', heldFor: 'Held for you for',
      checkout: 'Go to payment', release: 'Release them', completePayment: 'Complete the payment.',
      payWithin: 'Pay within', sandbox: 'Test mode: the sandbox payment provider.',
      payNow: 'Pay now', decline: 'Decline the payment', again: 'Join again',
      inLine: "You're in line", yourTurn: "It's your turn", heldTitle: 'Held for you',
      payment: 'Payment', confirmed: 'Confirmed', youLeft: 'You left', timesUp: "Time's up",
      soldOut: 'Sold out', saleClosed: 'Sale closed', joinAgainTitle: 'Please join again',
      notAvailable: 'Sale not available', noSuchSale: 'There is no such sale.',
      openFromShop: 'Open this page from the shop',
      openFromShopText: 'This page needs a sale and your sign-in; the shop links here with both.',
      saleEnded: 'This sale has ended.',
      left: (n) => (n === 1 ? '1 left' : `${n} left`),
      leftNone: 'Everything is held or sold right now; you can still join in case tickets come back.',
      lessThanMinute: '< 1 min', aboutMinutesShort: (m) => `~${m} min`,
      underAMinute: 'under a minute', aboutOneMinute: 'about 1 minute', aboutMinutes: (m) => `about ${m} minutes`,
      placeSay: (n, wait) => `You are number ${n} in line. Estimated wait: ${wait}.`,
      turnSay: 'It is your turn. Choose your tickets and hold them before the time runs out.',
      accessCode: 'Access code', zoomIn: 'Zoom in', zoomOut: 'Zoom out',
      seatLabel: (section, row, number, price, state) => `${section}, row ${row}, seat ${number}, ${price}, ${state}`,
      seatFree: 'free', seatHeld: 'held by someone', seatSold: 'sold', seatOff: 'not on sale', seatChosen: 'chosen',
      seatHeldWhy: 'That seat is held by someone else right now; it may come back.',
      seatSoldWhy: 'That seat is sold.', seatOffWhy: 'That seat is not on sale.',
      seatLimitWhy: (n) => `You can choose up to ${n} seats.`,
      seatTakenNow: (seat) => `Seat ${seat} was just taken by someone else.`,
      bestHint: 'The best free seats side by side, nearest the stage, held in one step.',
      bestCount: 'Seats together', bestCategory: 'Category', anyCategory: 'Any',
      bestHold: 'Hold the best seats together', orPick: 'Or choose seats on the map:',
      noAdjacent: 'No seats together are free as asked. Try fewer seats or another category, or choose seats on the map.',
      phaseFrom: (name, at) => `${name} from ${at}`,
      notInPhase: (phase, next, at) => (next
        ? `Right now “${phase}” is open to others. You can join in “${next}” from ${at}.`
        : `Right now “${phase}” is open to others, and no later part of this sale is open to you.`),
      codeRefused: 'That access code is not valid, or it has been used up.',
      notifyMe: "Tell me when it's my turn",
      notifyOn: 'We will tell you when it is your turn, even while you are in another tab.',
      notifyBlocked: 'Notifications are blocked in this browser: keep an eye on this tab.',
      comeBack: (d) => `When your turn comes, you will have ${d} to come back and choose.`,
      turnNotice: (d) => `Come back within ${d} to choose your tickets.`,
      titleFlash: '▶ Your turn!',
      seconds: (n) => (n === 1 ? '1 second' : `${n} seconds`),
      minutesLong: (n) => (n === 1 ? '1 minute' : `${n} minutes`),
      upTo: (n) => `(up to ${n})`,
      oneTicket: '1 ticket', tickets: (n) => `${n} tickets`, seats: (list) => `Seats ${list}`,
      lastFailure: (why) => `The last try did not go through: ${why} You can try again.`,
      paymentUnavailable: 'The payment form did not load. Try again in a moment.',
      heldWhat: (what) => `${what} held for you. Go to payment to keep them.`,
      heldSay: (what) => `${what} held. Go to payment before the time runs out.`,
      payingWhat: (what) => `Paying for ${what}.`, payingSay: 'Waiting for your payment.',
      confirmedText: (what) => `${what} — they are yours. A confirmation is on its way.`,
      soldOutWaiting: 'Sorry — everything was sold while you waited, and nothing held can come back. Nothing was charged.',
      soldOutText: 'Sorry — everything has been sold. Nothing was charged.',
      saleClosedText: 'This sale takes no more joins. Nothing was charged.',
      seatTaken: 'One of those seats was just taken. Please choose another.',
      rejoinText: 'The waiting room was restarted and places were lost. Join again to get a new place.',
      busy: (s) => `Busy — trying again in ${s} seconds.`,
      connectionLost: 'Connection lost. Trying again…', chooseSeat: 'Choose at least one seat.',
      chooseBetween: (max) => `Choose between 1 and ${max} tickets.`,
      paymentSent: 'Payment sent. Waiting for confirmation…', declining: 'Declining…',
      ended: 'This attempt has ended.',
      reasons: {
        left: 'You left the queue.',
        abandoned: 'Your place lapsed because this page was closed for too long.',
        admission_timeout: 'Your turn passed before you chose, so the tickets went to the next person in line.',
        hold_timeout: 'Your hold ran out and the tickets went back on sale.',
        released: 'You released your tickets; they are back on sale.',
        payment_failed: 'The payment did not go through. Nothing was charged and the tickets went back on sale.',
        payment_timeout: 'The payment took too long, so the tickets went back on sale.',
        sale_closed: 'The sale closed before your turn came. Nothing was charged.',
        refunded: 'Your purchase was cancelled and refunded; the tickets went back on sale.',
      },
      // What a payment provider's codes mean (Toss Payments', and sluice's own refusal).
      providerErrors: {
        PAY_PROCESS_CANCELED: 'You closed the payment window before paying.',
        PAY_PROCESS_ABORTED: 'The payment was stopped before it went through.',
        REJECT_CARD_COMPANY: 'Your card company declined the payment.',
        INVALID_CARD_EXPIRATION: 'The card has expired.',
        EXCEED_MAX_DAILY_PAYMENT_COUNT: 'This card has reached its number of payments for today.',
        NOT_AVAILABLE_PAYMENT: 'Payments cannot be taken at this hour; try again shortly.',
      },
    },
    ko: {
      language: '언어', waitingRoom: '대기실', loading: '불러오는 중…',
      joinIntro: '대기열에 들어온 순서대로 구매 차례가 돌아옵니다. 한 번만 줄을 서 주세요. 이 페이지를 열어 두시면 차례가 되었을 때 자동으로 입장합니다.',
      joinIntroLottery: (at) => `대기 순서는 판매가 시작되는 ${at}에 추첨으로 정해집니다. 그 전에는 언제 줄을 서도 기회가 같습니다. 한 번만 줄을 서 주세요. 이 페이지를 열어 두시면 차례가 되었을 때 자동으로 입장합니다.`,
      lotteryNote: (at) => `대기 순서는 판매가 시작되는 ${at}에 추첨으로 정해집니다. 그때까지 보이는 순서는 줄을 선 순서일 뿐, 실제 순서가 아닙니다.`,
      join: '대기열에 줄 서기',
      provingIntro: '이 판매는 봇이 사람의 자리를 차지하지 못하도록, 줄을 서기 전에 브라우저에 잠깐의 계산을 요청합니다. 자동으로 진행되니 이 페이지를 열어 두세요.',
      provingProgress: '브라우저 확인 중', proving: '브라우저 확인 중',
      provingSay: (p) => `줄 서기 전 브라우저 확인 중: ${p}% 완료.`,
      yourPlace: '내 순서', peopleWaiting: '대기 인원', estimatedWait: '예상 대기 시간',
      queueProgress: '대기열 진행 상황',
      keepOpen: '이 페이지를 열어 두세요. 새로고침하지 않아도 차례가 되면 자동으로 입장합니다.',
      leave: '대기열에서 나가기', howMany: '몇 장을 구매하시겠어요?', chooseSeats: '좌석을 선택하세요',
      chooseWithin: '남은 선택 시간', hold: '티켓 확보하기', heldFor: '확보 유지 시간',
      checkout: '결제하기', release: '확보 취소', completePayment: '결제를 완료해 주세요.',
      payWithin: '남은 결제 시간', sandbox: '테스트 모드: 샌드박스 결제입니다.',
      payNow: '지금 결제', decline: '결제 거절', again: '다시 줄 서기',
      inLine: '대기 중입니다', yourTurn: '내 차례입니다', heldTitle: '티켓을 확보했습니다',
      payment: '결제', confirmed: '구매 완료', youLeft: '대기열에서 나갔습니다', timesUp: '시간이 지났습니다',
      soldOut: '매진', saleClosed: '판매 종료', joinAgainTitle: '다시 줄을 서 주세요',
      notAvailable: '판매를 찾을 수 없습니다', noSuchSale: '해당 판매가 없습니다.',
      openFromShop: '상점에서 이 페이지를 열어 주세요',
      openFromShopText: '이 페이지에는 판매 정보와 로그인이 필요합니다. 상점의 링크로 들어와 주세요.',
      saleEnded: '이 판매는 종료되었습니다.',
      left: (n) => `${n}장 남음`,
      leftNone: '지금은 모든 티켓이 확보되었거나 판매되었습니다. 티켓이 다시 나올 수 있으니 줄을 서실 수 있습니다.',
      lessThanMinute: '1분 미만', aboutMinutesShort: (m) => `약 ${m}분`,
      underAMinute: '1분 미만', aboutOneMinute: '약 1분', aboutMinutes: (m) => `약 ${m}분`,
      placeSay: (n, wait) => `현재 대기 순서는 ${n}번입니다. 예상 대기 시간: ${wait}.`,
      turnSay: '내 차례입니다. 시간이 끝나기 전에 티켓을 선택해 확보하세요.',
      accessCode: '참여 코드', zoomIn: '확대', zoomOut: '축소',
      seatLabel: (section, row, number, price, state) => `${section} 구역 ${row}열 ${number}번, ${price}, ${state}`,
      seatFree: '선택 가능', seatHeld: '다른 분이 확보 중', seatSold: '판매 완료', seatOff: '판매하지 않음', seatChosen: '선택함',
      seatHeldWhy: '지금 다른 분이 확보한 좌석입니다. 다시 풀릴 수 있습니다.',
      seatSoldWhy: '이미 판매된 좌석입니다.', seatOffWhy: '판매하지 않는 좌석입니다.',
      seatLimitWhy: (n) => `최대 ${n}석까지 선택할 수 있습니다.`,
      seatTakenNow: (seat) => `${seat} 좌석을 방금 다른 분이 확보했습니다.`,
      bestHint: '무대에서 가장 가까운 빈 좌석을 나란히, 한 번에 확보합니다.',
      bestCount: '나란히 앉을 좌석 수', bestCategory: '등급', anyCategory: '전체',
      bestHold: '가장 좋은 좌석 나란히 확보', orPick: '또는 좌석 배치도에서 직접 선택:',
      noAdjacent: '요청하신 대로 나란히 비어 있는 좌석이 없습니다. 좌석 수나 등급을 바꾸거나 배치도에서 직접 선택하세요.',
      phaseFrom: (name, at) => `${name} ${at}부터`,
      notInPhase: (phase, next, at) => (next
        ? `지금은 “${phase}” 대상자만 참여할 수 있습니다. “${next}”에 ${at}부터 참여할 수 있습니다.`
        : `지금은 “${phase}” 대상자만 참여할 수 있으며, 이후에 참여할 수 있는 판매가 없습니다.`),
      codeRefused: '참여 코드가 올바르지 않거나 이미 모두 사용되었습니다.',
      notifyMe: '내 차례가 되면 알려 주세요',
      notifyOn: '다른 탭을 보고 있어도 차례가 되면 알려 드립니다.',
      notifyBlocked: '이 브라우저에서 알림이 차단되어 있습니다. 이 탭을 계속 확인해 주세요.',
      comeBack: (d) => `차례가 되면 ${d} 안에 돌아와 선택해야 합니다.`,
      turnNotice: (d) => `${d} 안에 돌아와 티켓을 선택하세요.`,
      titleFlash: '▶ 내 차례입니다!',
      seconds: (n) => `${n}초`,
      minutesLong: (n) => `${n}분`,
      upTo: (n) => `(최대 ${n}장)`,
      oneTicket: '티켓 1장', tickets: (n) => `티켓 ${n}장`, seats: (list) => `좌석 ${list}`,
      lastFailure: (why) => `마지막 결제가 완료되지 않았습니다: ${why} 다시 시도할 수 있습니다.`,
      paymentUnavailable: '결제 양식을 불러오지 못했습니다. 잠시 후 다시 시도해 주세요.',
      heldWhat: (what) => `${what}을(를) 확보했습니다. 결제하시면 구매가 완료됩니다.`,
      heldSay: (what) => `${what} 확보. 시간이 끝나기 전에 결제하세요.`,
      payingWhat: (what) => `${what} 결제 중입니다.`, payingSay: '결제를 기다리고 있습니다.',
      confirmedText: (what) => `${what} 구매가 완료되었습니다. 확인 메시지를 보내 드립니다.`,
      soldOutWaiting: '죄송합니다. 기다리시는 동안 모두 판매되었고, 다시 나올 티켓도 없습니다. 결제된 금액은 없습니다.',
      soldOutText: '죄송합니다. 모두 판매되었습니다. 결제된 금액은 없습니다.',
      saleClosedText: '이 판매는 더 이상 줄 서기를 받지 않습니다. 결제된 금액은 없습니다.',
      seatTaken: '방금 다른 분이 그 좌석을 선택했습니다. 다른 좌석을 골라 주세요.',
      rejoinText: '대기실이 다시 시작되어 순서가 사라졌습니다. 다시 줄을 서면 새 순서를 받습니다.',
      busy: (s) => `사용자가 많습니다. ${s}초 후에 다시 시도합니다.`,
      connectionLost: '연결이 끊겼습니다. 다시 연결하는 중…', chooseSeat: '좌석을 하나 이상 선택하세요.',
      chooseBetween: (max) => `1장에서 ${max}장 사이로 선택하세요.`,
      paymentSent: '결제를 보냈습니다. 확인을 기다리는 중…', declining: '거절하는 중…',
      ended: '이 구매 시도는 종료되었습니다.',
      reasons: {
        left: '대기열에서 나갔습니다.',
        abandoned: '페이지가 너무 오래 닫혀 있어 순서가 취소되었습니다.',
        admission_timeout: '선택하시기 전에 차례가 지나 다음 분께 넘어갔습니다.',
        hold_timeout: '확보 시간이 끝나 티켓이 다시 판매됩니다.',
        released: '티켓 확보를 취소하셨습니다. 티켓은 다시 판매됩니다.',
        payment_failed: '결제가 완료되지 않았습니다. 결제된 금액은 없으며 티켓은 다시 판매됩니다.',
        payment_timeout: '결제 시간이 초과되어 티켓이 다시 판매됩니다.',
        sale_closed: '차례가 오기 전에 판매가 종료되었습니다. 결제된 금액은 없습니다.',
        refunded: '구매가 취소되어 환불되었습니다. 티켓은 다시 판매됩니다.',
      },
      providerErrors: {
        PAY_PROCESS_CANCELED: '결제 전에 결제창을 닫았습니다.',
        PAY_PROCESS_ABORTED: '결제가 완료되기 전에 중단되었습니다.',
        REJECT_CARD_COMPANY: '카드사에서 결제를 거절했습니다.',
        INVALID_CARD_EXPIRATION: '카드 유효기간이 지났습니다.',
        EXCEED_MAX_DAILY_PAYMENT_COUNT: '이 카드의 오늘 결제 횟수를 넘었습니다.',
        NOT_AVAILABLE_PAYMENT: '지금은 결제할 수 없는 시간입니다. 잠시 후 다시 시도해 주세요.',
      },
    },
  };
  const LANGUAGES = Object.keys(MESSAGES);
  const chosen = localStorage.getItem('sluice.language');
  let lang = LANGUAGES.includes(chosen) ? chosen
    : LANGUAGES.includes(document.documentElement.lang) ? document.documentElement.lang : 'en';
  const t = (key, ...args) => {
    const m = MESSAGES[lang][key] ?? MESSAGES.en[key];
    return typeof m === 'function' ? m(...args) : m;
  };

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

  class Problem extends Error {
    constructor(status, body, retryAfter) {
      super(body.detail || body.title || `HTTP ${status}`);
      this.status = status;
      this.type = body.type || '';
      this.retryAfter = retryAfter;
      this.body = body;
    }
  }

  async function api(method, path, body, headers = {}) {
    const res = await fetch(path, {
      method,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body ? { 'Content-Type': 'application/json' } : {}),
        ...headers,
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
    const res = await fetch(statusPath('/events'), { headers, signal });
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
      const wait = attempt ? attempt.poll_after_ms : 2000;
      await sleep(Math.max(500, wait));
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

  const isTransient = (e) => e instanceof Problem && (e.status === 429 || e.status >= 500);

  /// The user id the token names (`sub`): the proof of work is bound to it.
  function tokenUser() {
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
      const worker = new Worker('/waiting-room/proof-of-work.js');
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

  /// The wait in a few characters, for the figure box.
  function shortWait(secs) {
    if (secs == null) return '–';
    return secs < 60 ? t('lessThanMinute') : t('aboutMinutesShort', Math.round(secs / 60));
  }

  function minutes(secs) {
    if (secs == null) return '–';
    if (secs < 60) return t('underAMinute');
    const m = Math.round(secs / 60);
    return m === 1 ? t('aboutOneMinute') : t('aboutMinutes', m);
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
    const known = offer && typeof offer.remaining === 'number';
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

  function describeHold(hold) {
    if (!hold) return '';
    const what = hold.seat_ids && hold.seat_ids.length ? t('seats', hold.seat_ids.join(', '))
      : hold.quantity === 1 ? t('oneTicket') : t('tickets', hold.quantity);
    return hold.amount === undefined ? what : `${what} · ${money(hold.amount, hold.currency)}`;
  }

  /// An amount in the currency's smallest unit (KRW: won; USD: cents), in the visitor's language.
  function money(amount, currency) {
    const format = new Intl.NumberFormat(lang, { style: 'currency', currency });
    return format.format(amount / 10 ** format.resolvedOptions().maximumFractionDigits);
  }

  // ---- paying through Stripe -----------------------------------------------------------------

  let stripeMounted = null; // the client secret of the payment form on the page
  let stripeMounting = null; // the mounting under way: answers that arrive meanwhile wait for it
  let stripePay = null; // confirms the payment with what the buyer entered

  const scripts = new Map(); // the provider's scripts, loading or loaded, by URL

  /// The provider's script (Stripe.js, Toss's or PortOne's SDK), loaded once from where
  /// checkout says (`payment.pay.js_url`).
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

  /// Mounts Stripe's Payment Element for the attempt's PaymentIntent (its client secret comes
  /// with checkout's answer; a page opened later asks checkout again, which answers the same
  /// intent). Where Stripe.js has no Payment Element (a test double's), its card element.
  function mountStripe(next) {
    stripeMounting ??= mountStripeOnce(next).finally(() => { stripeMounting = null; });
    return stripeMounting;
  }

  async function mountStripeOnce(next) {
    let pay = next.payment.pay;
    if (!pay && stripeMounted) return;
    if (!pay) pay = (await api('POST', `/v1/attempts/${next.attempt_id}/checkout`)).payment.pay;
    if (!pay || stripeMounted === pay.client_secret) return;
    await loadScript(pay.js_url);
    const stripe = window.Stripe(pay.publishable_key);
    const slot = $('stripe-element');
    slot.replaceChildren();
    if (typeof stripe.confirmPayment === 'function') {
      const elements = stripe.elements({ clientSecret: pay.client_secret, locale: lang });
      elements.create('payment').mount(slot);
      stripePay = () => stripe.confirmPayment({
        elements, redirect: 'if_required', confirmParams: { return_url: location.href },
      });
    } else {
      const card = stripe.elements().create('card');
      card.mount(slot);
      stripePay = () => stripe.confirmCardPayment(pay.client_secret, { payment_method: { card } });
    }
    stripeMounted = pay.client_secret;
  }

  // ---- paying in Toss's or PortOne's window -------------------------------------------------

  /// Opens the provider's payment window for the attempt (what it needs comes with checkout's
  /// answer; a page opened later asks checkout again, which answers the same payment). Toss
  /// sends the buyer back to sluice, which confirms and brings them back here; PortOne answers
  /// here, and reports to sluice by its webhook.
  async function payInWindow(next) {
    const provider = next.payment.provider;
    let pay = next.payment.pay;
    if (!pay) pay = (await api('POST', `/v1/attempts/${next.attempt_id}/checkout`)).payment.pay;
    await loadScript(pay.js_url);
    if (provider === 'toss') {
      const toss = window.TossPayments(pay.client_key);
      await toss.payment({ customerKey: window.TossPayments.ANONYMOUS || 'ANONYMOUS' }).requestPayment({
        method: 'CARD', amount: { currency: pay.currency, value: pay.amount },
        orderId: pay.order_id, orderName: pay.order_name,
        // Paths when sluice has no http.public_url: they are this page's origin's.
        successUrl: new URL(pay.success_url, location.href).href,
        failUrl: new URL(pay.fail_url, location.href).href,
      });
      return false;
    }
    const result = await window.PortOne.requestPayment({
      storeId: pay.store_id, channelKey: pay.channel_key, paymentId: pay.payment_id,
      orderName: pay.order_name, totalAmount: pay.amount, currency: `CURRENCY_${pay.currency}`,
      payMethod: 'CARD', locale: lang === 'ko' ? 'KO_KR' : 'EN_US',
    });
    if (result && result.code) {
      showFailure(`${result.code}: ${result.message || ''}`);
      return false;
    }
    return true;
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

  function show(next) {
    const moved = !attempt || attempt.state !== next.state || attempt.position !== next.position;
    const turnCame = attempt && attempt.state === 'QUEUED' && next.state === 'ADMITTED';
    attempt = next;
    sessionStorage.setItem(attemptKey, next.attempt_id);
    alertUser('');
    redraw = () => show(attempt);
    switch (next.state) {
      case 'QUEUED': {
        if (next.sold_out) {
          // Nothing left and nothing held that could come back: say so now, not at the turn,
          // and give the place up (a failed leave changes nothing for the user).
          api('DELETE', `/v1/attempts/${next.attempt_id}`).catch(() => {});
          finish(false, t('soldOut'), t('soldOutWaiting'));
          $('again').hidden = true;
          break;
        }
        if (firstPosition == null || next.position > firstPosition) firstPosition = next.position;
        step('queued', t('inLine'));
        lotteryTexts();
        $('position').textContent = next.position ?? '–';
        $('waiting').textContent = next.waiting ?? '–';
        $('eta').textContent = shortWait(next.estimated_wait_secs);
        const done = firstPosition > 1 ? (firstPosition - next.position) / (firstPosition - 1) : 0;
        $('progress').value = Math.round(done * 100);
        showLeft();
        showNotify();
        // Read out when the place changes, not on every push of the same figures.
        if (moved) say(t('placeSay', next.position, minutes(next.estimated_wait_secs)));
        break;
      }
      case 'ADMITTED':
        step('admitted', t('yourTurn'));
        prepareChoice();
        countdown('admission-countdown', next.admission_expires_at);
        say(t('turnSay'));
        if (turnCame) tellTurn(next);
        break;
      case 'HOLD':
        step('held', t('heldTitle'));
        $('held-what').textContent = t('heldWhat', describeHold(next.hold));
        countdown('hold-countdown', next.hold && next.hold.expires_at);
        say(t('heldSay', describeHold(next.hold)));
        break;
      case 'PAYMENT_PENDING':
        step('paying', t('payment'));
        $('paying-what').textContent = t('payingWhat', describeHold(next.hold).toLowerCase());
        $('sandbox').hidden = !(next.payment && next.payment.provider === 'sandbox');
        $('stripe').hidden = !(next.payment && next.payment.provider === 'stripe');
        $('provider-window').hidden = !(next.payment && WINDOWS.includes(next.payment.provider));
        if (next.payment) showFailure(next.payment.last_failure);
        if (next.payment && next.payment.provider === 'stripe') mountStripe(next).catch(handleProblem);
        countdown('payment-countdown', next.payment && next.payment.expires_at);
        say(t('payingSay'));
        break;
      case 'CONFIRMED':
        finish(true, t('confirmed'), t('confirmedText', describeHold(next.hold)));
        break;
      case 'EXPIRED':
        finish(false, next.reason === 'left' ? t('youLeft') : t('timesUp'),
          t('reasons')[next.reason] || t('ended'));
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
        const events = new EventSource(`/v1/public/sales/${saleId}/seat-map/events`);
        events.addEventListener('map', (e) => apply(JSON.parse(e.data).map));
        events.addEventListener('seats', (e) => {
          for (const change of JSON.parse(e.data).seats) set(change.seat, change.state);
        });
        return () => events.close();
      }
      const timer = setInterval(async () => {
        const res = await fetch(`/v1/public/sales/${saleId}/seat-map`).catch(() => null);
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
          const res = await fetch(`/v1/public/layouts/${offer.layout_id}`);
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

  /// How long to wait (ms) before the `attemptNo`-th retry of a busy answer: at least its
  /// Retry-After, doubled at each retry, and up to as much again drawn at random, so a crowd
  /// turned away at once does not come back at once (capped at a minute).
  function backoff(retryAfter, attemptNo) {
    const floor = Math.min(60, Math.max(1, retryAfter) * 2 ** attemptNo) * 1000;
    return floor + Math.random() * floor;
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
  $('stripe').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!stripePay) return;
    act($('stripe-pay'), async () => {
      const result = await stripePay();
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
    $('come-back').textContent = offer ? t('comeBack', duration(offer.admission_ttl_secs)) : '';
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
    const res = await fetch('/v1/web-push/key');
    if (!res.ok) return; // no Web Push here
    const { public_key: key } = await res.json();
    const registration = await navigator.serviceWorker.register('/waiting-room/sw.js', { scope: '/waiting-room/' });
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
      const res = await fetch('/waiting-room/brand.json');
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
    // What is left, kept current while the visitor waits to join or waits in line.
    setInterval(() => {
      if (shownStep === 'join' || shownStep === 'queued') refreshOffer();
    }, 10000);
  }

  start();
})();
