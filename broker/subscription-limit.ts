// MAX_SUBSCRIPTIONS: the filters granted to each client, counted as they are granted (so a
// burst of SUBSCRIBEs cannot slip past the cap) and forgotten on UNSUBSCRIBE and disconnect.
import type { Aedes, Client } from 'aedes';

export class SubscriptionLimit {
  /** Includes filters still being added. */
  private readonly granted = new WeakMap<Client, Set<string>>();

  constructor(readonly max: number) {}

  /** Grants `filter` to `client` unless that would take it over the cap. */
  admit(client: Client, filter: string): boolean {
    const filters = this.grantedTo(client);
    if (!filters.has(filter) && filters.size >= this.max) return false;
    filters.add(filter);
    return true;
  }

  /** Keeps the counts in step with the client's subscriptions and connection. */
  follow(aedes: Aedes): void {
    aedes.on('unsubscribe', (topics, client) => {
      const filters = this.granted.get(client);
      for (const topic of topics) filters?.delete(topic);
    });
    aedes.on('clientDisconnect', (client) => this.granted.delete(client));
  }

  private grantedTo(client: Client): Set<string> {
    let set = this.granted.get(client);
    if (!set) {
      // Seeded from Aedes' own list: a persistent session's restored subscriptions count too.
      set = new Set(Object.keys((client as unknown as { subscriptions?: Record<string, unknown> }).subscriptions ?? {}));
      this.granted.set(client, set);
    }
    return set;
  }
}
