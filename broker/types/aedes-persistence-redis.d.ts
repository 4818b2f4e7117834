// aedes-persistence-redis 11.x ships no type declarations; this covers what broker/cluster.ts
// (and its tests) use.
declare module 'aedes-persistence-redis' {
  namespace createPersistence {
    interface Options {
      /** An ioredis connection to use instead of one built from the other options. */
      conn?: unknown;
      /** Most queued messages delivered to a reconnecting persistent session (default 1000). */
      maxSessionDelivery?: number;
      /** Seconds a queued packet is kept (0 = forever, the default). */
      packetTTL?: (packet: unknown) => number;
    }

    /** aedes-persistence's CallBackPersistence wrapper: without a callback, methods return promises. */
    interface RedisPersistence {
      setup(broker: unknown): Promise<void>;
      /** Unsubscribes from the broker's `$SYS/sub/+` and disconnects its Redis connection. */
      destroy(): Promise<void>;
      /** The persistent subscriptions matching a topic, as this instance knows them. */
      subscriptionsByTopic(topic: string): Promise<Array<{ clientId: string; topic: string; qos: number }>>;
    }
  }

  function createPersistence(options?: createPersistence.Options): createPersistence.RedisPersistence;
  export = createPersistence;
}
