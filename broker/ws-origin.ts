// MQTT_WS_ALLOWED_ORIGINS: which web pages may open the MQTT WebSocket listener. A browser
// names the page that opens a WebSocket in its Origin header; any page the browser shows
// (another site, an advertisement) could otherwise connect to a listener the browser's host
// can reach and act as an anonymous device. Clients that are not browsers send no Origin.
import { ConfigError } from '../contract/index.js';

/** `scheme://host[:port]` as browsers send it (lower-case host, no default port); undefined for anything else. */
function normalOrigin(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  // A path, query, fragment or credentials: not an origin (an entry is refused rather than cut to one).
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') return undefined;
  return `${url.protocol}//${url.host}`;
}

/** The listed Origins, normalized; an entry that is not `http(s)://host[:port]` stops the start. */
export function allowedOrigins(list: readonly string[]): ReadonlySet<string> {
  const allowed = new Set<string>();
  for (const entry of list) {
    const origin = normalOrigin(entry);
    if (origin === undefined) {
      throw new ConfigError('MQTT_WS_ALLOWED_ORIGINS', `${JSON.stringify(entry)} is not an origin: scheme://host[:port], e.g. https://hmi.plant.local`);
    }
    allowed.add(origin);
  }
  return allowed;
}

/** True for a client without an Origin (not a browser) and for a listed browser Origin. */
export function originAllowed(origin: string | undefined, allowed: ReadonlySet<string>): boolean {
  if (origin === undefined) return true;
  const normal = normalOrigin(origin);
  return normal !== undefined && allowed.has(normal);
}
