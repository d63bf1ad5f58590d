// Speaking the visitor's language, for the waiting page and the operator console alike: a text
// by its key (from the tables of texts-<lang>.js) and an amount of money.
// @ts-check

/** @typedef {Record<string, any>} Texts */

/**
 * The language to speak: `wanted` when there are texts in it, else the page's own `lang` (the
 * server's pick from Accept-Language) when there are, else English.
 * @param {Record<string, Texts>} tables
 * @param {string | null} wanted
 * @param {string} pageLang
 */
export function languageOf(tables, wanted, pageLang) {
  if (wanted && tables[wanted]) return wanted;
  return tables[pageLang] ? pageLang : 'en';
}

/**
 * `t(key, ...values)`: the text `key` in the language `lang()` names (read at each call, so a
 * change of language takes effect at once), English where that language lacks it; a text
 * that takes values is given them.
 * @param {Record<string, Texts>} tables
 * @param {() => string} lang
 * @returns {(key: string, ...values: any[]) => any}
 */
export function translator(tables, lang) {
  return (key, ...values) => {
    const text = tables[lang()]?.[key] ?? tables.en[key];
    return typeof text === 'function' ? text(...values) : text;
  };
}

/**
 * An amount in the currency's smallest unit (KRW: won; USD: cents), as someone speaking `lang`
 * reads it.
 * @param {number} amount
 * @param {string} currency
 * @param {string} lang
 */
export function money(amount, currency, lang) {
  const format = new Intl.NumberFormat(lang, { style: 'currency', currency });
  return format.format(amount / 10 ** (format.resolvedOptions().maximumFractionDigits ?? 0));
}
