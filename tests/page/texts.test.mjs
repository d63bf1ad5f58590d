// The texts of the page and of the console: every language says every text, in the same form
// (a text, a function of the same values, or a table of the same keys), and says it in its own
// words.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import en, { operator as enConsole } from '../../src/api/page/texts-en.js';
import ko, { operator as koConsole } from '../../src/api/page/texts-ko.js';

/** The shape of a table of texts: each key, and what its entry is. */
function shape(table, at = '') {
  return Object.entries(table).flatMap(([key, value]) => {
    const path = `${at}${key}`;
    if (typeof value === 'function') return [`${path}(${value.length})`];
    if (typeof value === 'object') return shape(value, `${path}.`);
    return [`${path}: ${typeof value}`];
  }).sort();
}

test('both languages have the same texts in the same shape', () => {
  assert.deepEqual(shape(ko), shape(en));
});

test("the console's texts too, each said in both languages", () => {
  assert.deepEqual(shape(koConsole), shape(enConsole));
  for (const [key, value] of Object.entries(enConsole)) {
    if (typeof value !== 'string') continue;
    assert.ok(value.trim() && koConsole[key].trim(), key);
  }
  assert.match(koConsole.title, /[\uAC00-\uD7A3]/, 'in Hangul');
});

test('every text is said, and Korean in its own words', () => {
  for (const [key, value] of Object.entries(en)) {
    if (typeof value !== 'string') continue;
    assert.ok(value.trim(), `en.${key} is empty`);
    assert.ok(ko[key].trim(), `ko.${key} is empty`);
  }
  assert.notEqual(ko.waitingRoom, en.waitingRoom);
  assert.match(ko.waitingRoom, /[\uAC00-\uD7A3]/, 'in Hangul');
});

test('a text with values puts them in, in both languages', () => {
  const withValues = Object.entries(en).filter(([, v]) => typeof v === 'function');
  assert.ok(withValues.length > 0);
  for (const [key, say] of withValues) {
    const values = Array.from({ length: say.length }, (_, i) => `VALUE${i}`);
    for (const [lang, table] of [['en', en], ['ko', ko]]) {
      const text = table[key](...values);
      assert.equal(typeof text, 'string', `${lang}.${key}`);
      assert.ok(text.includes('VALUE0'), `${lang}.${key} leaves out its value: ${text}`);
    }
  }
});
