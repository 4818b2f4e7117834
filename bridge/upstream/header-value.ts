// Device strings sent upstream in a header (the lock name in X-Lock-Key). A header value
// holds visible ASCII only: undici refuses CR, LF and anything above U+00FF, and the rest of
// Latin-1 would reach the upstream as bytes of no agreed encoding. So such a value is sent as
// UTF-8 with every byte outside visible ASCII, and `%` itself, percent-encoded: a name of plain
// ASCII goes as it is, and `decodeURIComponent` gives back any other exactly.

const NEEDS_ENCODING = /[^\x21-\x24\x26-\x7e]/;

const hex = (byte: number): string => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;

/** `text` as a header value that every HTTP client sends as is; linear in its length. */
export function headerValue(text: string): string {
  if (!NEEDS_ENCODING.test(text)) return text;
  let out = '';
  for (const ch of text) {
    if (!NEEDS_ENCODING.test(ch)) out += ch;
    // A lone surrogate becomes U+FFFD's bytes, as any UTF-8 encoder does.
    else for (const byte of Buffer.from(ch, 'utf8')) out += hex(byte);
  }
  return out;
}
