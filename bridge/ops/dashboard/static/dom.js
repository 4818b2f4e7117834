// DOM helpers. Every server value goes in through textContent; nothing here parses HTML.

export const byId = (id) => document.getElementById(id);

/**
 * Creates an element: opts.className, opts.text (set as textContent), opts.attrs (plain
 * attributes; never style or event handlers), opts.data (dataset).
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

function setAttr(node, name, value) {
  const lower = name.toLowerCase();
  if (lower === 'style' || lower.startsWith('on')) throw new Error(`refusing attribute ${name}`);
  node.setAttribute(name, String(value));
}

/** A text cell; `num` right-aligns it with tabular figures. */
export function td(text, className = '') {
  return el('td', { className, text });
}

export const numTd = (text) => td(text, 'num');

/** A cell holding other nodes. */
export const nodeTd = (children, className = '') => el('td', { className }, children);

export function badge(text, tone) {
  return el('span', { className: `badge badge-${tone}`, text });
}

export function setText(id, text) {
  const node = byId(id);
  if (node) node.textContent = text;
}

/** Shows or hides an element by id. */
export function show(id, visible) {
  const node = byId(id);
  if (node) node.hidden = !visible;
}

/**
 * A small table in a horizontally scrolling wrapper. columns: [{label, num}]; rows: arrays of
 * cell texts (numbers are formatted by the caller).
 */
export function table(columns, rows, caption) {
  const head = el('tr', {}, columns.map((c) => el('th', { className: c.num ? 'num' : '', text: c.label, attrs: { scope: 'col' } })));
  const body = rows.map((cells) => el('tr', {}, cells.map((text, i) => td(text, columns[i]?.num ? 'num' : ''))));
  const parts = [];
  if (caption) parts.push(el('caption', { text: caption }));
  parts.push(el('thead', {}, [head]), el('tbody', {}, body));
  return el('div', { className: 'table-wrap' }, [el('table', { className: 'small' }, parts)]);
}
