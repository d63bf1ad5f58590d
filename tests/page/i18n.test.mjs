// Speaking the visitor's language: the language chosen, a text by its key with English where a
// language lacks it, and money as its speakers write it.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { languageOf, money, translator } from '../../src/api/page/i18n.js';

const TABLES = {
  en: { hello: 'Hello', place: (n) => `place ${n}`, onlyEnglish: 'fallback' },
  ko: { hello: '안녕하세요', place: (n) => `${n}번째` },
};

test('the language chosen wins, then the page\'s, then English', () => {
  assert.equal(languageOf(TABLES, 'ko', 'en'), 'ko');
  assert.equal(languageOf(TABLES, 'fr', 'ko'), 'ko');
  assert.equal(languageOf(TABLES, null, 'de'), 'en');
});

test('a text in the language of the moment, with its values, else in English', () => {
  let lang = 'ko';
  const t = translator(TABLES, () => lang);
  assert.equal(t('hello'), '안녕하세요');
  assert.equal(t('place', 3), '3번째');
  assert.equal(t('onlyEnglish'), 'fallback');
  lang = 'en';
  assert.equal(t('place', 3), 'place 3');
});

test('money in its smallest unit, as its speakers write it', () => {
  assert.equal(money(110000, 'KRW', 'ko'), '₩110,000');
  assert.equal(money(1999, 'USD', 'en'), '$19.99');
});
