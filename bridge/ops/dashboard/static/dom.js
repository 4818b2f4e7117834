// @ts-check
// DOM helpers. Every server value goes in through textContent; nothing here parses HTML.

/**
 * An element of the page by id. Typed as present: index.html holds every id the modules ask for
 * (a unit test checks it).
 * @param {string} id
 * @returns {HTMLElement}
 */
export const byId = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * @typedef {object} ElementOptions
 * @property {string} [className]
 * @property {unknown} [text] set as textContent
 * @property {Record<string, unknown>} [attrs] plain attributes; never style or event handlers
 * @property {Record<string, string>} [data] the dataset
 */

/**
 * Creates an element: opts.className, opts.text (set as textContent), opts.attrs (plain
 * attributes; never style or event handlers), opts.data (dataset).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {ElementOptions} [opts]
 * @param {Array<Node | string>} [children]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, opts = {}, children = []) {
  const node = document.createElement(tag);
  if (opts.className) node.className = opts.className;
  if (opts.text !== undefined && opts.text !== null) node.textContent = String(opts.text);
  for (const [name, value] of Object.entries(opts.attrs ?? {})) setAttr(node, name, value);
  Object.assign(node.dataset, opts.data ?? {});
  node.append(...children);
  return node;
}

/**
 * @param {Element} node
 * @param {string} name
 * @param {unknown} value
 */
function setAttr(node, name, value) {
  const lower = name.toLowerCase();
  if (lower === 'style' || lower.startsWith('on')) throw new Error(`refusing attribute ${name}`);
  node.setAttribute(name, String(value));
}

/**
 * A text cell; `num` right-aligns it with tabular figures.
 * @param {unknown} text
 */
export function td(text, className = '') {
  return el('td', { className, text });
}

/** @param {unknown} text */
export const numTd = (text) => td(text, 'num');

/**
 * A cell holding other nodes.
 * @param {Array<Node | string>} children
 */
export const nodeTd = (children, className = '') => el('td', { className }, children);

/**
 * @param {unknown} text
 * @param {string} tone
 */
export function badge(text, tone) {
  return el('span', { className: `badge badge-${tone}`, text });
}

/**
 * @param {string} id
 * @param {string} text
 */
export function setText(id, text) {
  const node = byId(id);
  if (node) node.textContent = text;
}

/**
 * Shows or hides an element by id.
 * @param {string} id
 * @param {boolean} visible
 */
export function show(id, visible) {
  const node = byId(id);
  if (node) node.hidden = !visible;
}

/**
 * A small table in a horizontally scrolling wrapper. columns: [{label, num}]; rows: arrays of
 * cell texts (numbers are formatted by the caller).
 * @param {Array<{ label: string; num?: boolean }>} columns
 * @param {unknown[][]} rows
 * @param {string} [caption]
 */
export function table(columns, rows, caption) {
  const head = el(
    'tr',
    {},
    columns.map((c) => el('th', { className: c.num ? 'num' : '', text: c.label, attrs: { scope: 'col' } })),
  );
  const body = rows.map((cells) =>
    el(
      'tr',
      {},
      cells.map((text, i) => td(text, columns[i]?.num ? 'num' : '')),
    ),
  );
  const parts = [];
  if (caption) parts.push(el('caption', { text: caption }));
  parts.push(el('thead', {}, [head]), el('tbody', {}, body));
  return el('div', { className: 'table-wrap' }, [el('table', { className: 'small' }, parts)]);
}
