// Aedes' maps keyed by names from the wire, made safe from Object.prototype's names.

/**
 * GHSA-52qw-whmv-87c5, fixed in Aedes 1.1.3 but not in 2.0.0-beta.1: Aedes keys these maps by
 * client ids, topic filters and broker ids from the wire, and with a plain `{}` a name that
 * Object.prototype has (`toString`, `constructor`, `__proto__`…) reads back as present. One
 * UNSUBSCRIBE of `toString` from any device, or a client id `constructor`, threw out of Aedes
 * and ended the process. Replaces each map (still empty, or copied) by a prototype-less one.
 */
export function withoutPrototype(owner: object, ...keys: string[]): void {
  const maps = owner as Record<string, object>;
  for (const key of keys) maps[key] = Object.assign(Object.create(null) as object, maps[key]);
}
