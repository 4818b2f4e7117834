// Topic access rules of docs/CONTRACT.md "Topics", as pure functions of an identity.
export type Role = 'device' | 'observer' | 'operator';

export interface Identity {
  role: Role;
  /** Set for role `device`: the only device whose topics it may touch. */
  deviceId: string | undefined;
}

/** The topics `identity` may publish to (MQTT filters); docs/security.md's role table lists them. */
export function publishPatterns(identity: Identity): string[] {
  switch (identity.role) {
    case 'device':
      return identity.deviceId === undefined ? [] : [`devices/${identity.deviceId}/infer/+`, `devices/${identity.deviceId}/image/#`];
    case 'observer':
      return [];
    case 'operator':
      // Sparkplug: a host application (an operator) asks the Edge Node for a rebirth and
      // publishes its own STATE.
      return ['devices/+/infer/+', 'devices/+/image/#', 'spBv1.0/+/NCMD/+', 'spBv1.0/STATE/+'];
  }
}

/** The filters `identity` may subscribe within; docs/security.md's role table lists them. */
export function subscribePatterns(identity: Identity, observerTopics: readonly string[]): readonly string[] {
  switch (identity.role) {
    case 'device':
      // Its whole namespace: the result topic and any MQTT 5 response topic it names there.
      return identity.deviceId === undefined ? [] : [`devices/${identity.deviceId}/#`, 'bridge/+/status'];
    case 'observer':
      return ['devices/+/result', 'devices/+/stream', 'devices/+/infer/+', 'bridge/#', 'spBv1.0/#', ...observerTopics];
    case 'operator':
      return ['#', '$SYS/#'];
  }
}

/**
 * True when every topic that `filter` can match is also matched by `pattern` (both MQTT
 * filters), so a client may narrow what it was granted but never widen it.
 */
export function filterWithin(filter: string, pattern: string): boolean {
  const f = filter.split('/');
  const p = pattern.split('/');
  for (let i = 0; i < p.length; i += 1) {
    const pl = p[i];
    const fl = f[i];
    if (pl === '#') return i > 0 || !(fl ?? '').startsWith('$'); // '#' never matches $-topics at the root
    if (fl === undefined) return false;
    if (fl === '#') return false;
    if (pl === '+') {
      if (i === 0 && fl.startsWith('$')) return false;
      continue;
    }
    if (pl !== fl) return false;
  }
  return f.length === p.length;
}

export function mayPublish(identity: Identity, topic: string): boolean {
  if (topic.startsWith('$')) return false; // $SYS/ is never writable by clients
  return publishPatterns(identity).some((pattern) => filterWithin(topic, pattern));
}

/** `observerTopics`: filters observers may read besides the contract's (the plant's namespace, `{root}/#`). */
export function maySubscribe(identity: Identity, filter: string, observerTopics: readonly string[] = []): boolean {
  return subscribePatterns(identity, observerTopics).some((pattern) => filterWithin(filter, pattern));
}
