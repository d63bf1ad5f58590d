// The waiting room's service worker: it only shows the "it's your turn" push message that
// sluice sends when the user is admitted (see waiting-room.js, "be told"), worded in the
// page's language, and brings the user back to the waiting page when it is clicked. It
// controls no page and caches nothing.
'use strict';

const WORDS = {
  en: {
    title: "It's your turn",
    body: (m) => `Come back within ${m} ${m === 1 ? 'minute' : 'minutes'} to choose your tickets.`,
  },
  ko: {
    title: '내 차례입니다',
    body: (m) => `${m}분 안에 돌아와 티켓을 선택하세요.`,
  },
};

self.addEventListener('push', (event) => {
  let data = {};
  try { data = event.data ? event.data.json() : {}; } catch (e) { /* shown with defaults */ }
  const words = WORDS[data.lang] || WORDS.en;
  const minutes = Math.max(1, Math.round((Date.parse(data.until) - Date.now()) / 60000) || 1);
  event.waitUntil(self.registration.showNotification(words.title, {
    body: words.body(minutes),
    tag: data.attempt, // the page's own notification of the same turn replaces this one
    data: { url: new URL(data.url || '/', self.location.origin).href },
  }));
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const url = event.notification.data && event.notification.data.url;
  event.waitUntil((async () => {
    const tabs = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    const open = tabs.find((tab) => url && tab.url.startsWith(url));
    if (open) return open.focus();
    if (url) return self.clients.openWindow(url);
    return undefined;
  })());
});
