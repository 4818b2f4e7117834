// The bridge's own MQTT topics: bridge/{instanceId}/status (retained `online`/`offline`) and
// bridge/{instanceId}/metrics (a JSON snapshot every interval, not retained).
import { topics, type Publish, type Status } from '../../contract/index.js';
import type { Logger } from '../logger.js';
import { VERSION } from '../version.js';

/** The retained status message; also the external broker's Will (`offline`). */
export function statusMessage(state: Status['state'], instanceId: string, since: string): Buffer {
  return Buffer.from(JSON.stringify({ state, instance: instanceId, version: VERSION, since } satisfies Status));
}

export interface StatusOptions {
  instanceId: string;
  since: string;
  publish: Publish;
  /** The metrics snapshot to publish; it starts a new interval. */
  snapshot(): Promise<object>;
  intervalMs: number;
  logger: Logger;
}

export class StatusTopics {
  private timer: NodeJS.Timeout | undefined;
  private snapshotting = false;

  constructor(private readonly options: StatusOptions) {}

  /** Publishes `online` and starts the metrics snapshots. */
  async online(): Promise<void> {
    await this.publishStatus('online');
    this.timer = setInterval(() => this.publishSnapshot(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Stops the snapshots; every later call is a no-op. */
  stopSnapshots(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  async offline(): Promise<void> {
    this.stopSnapshots();
    await this.publishStatus('offline');
  }

  private publishStatus(state: Status['state']): Promise<void> {
    const { publish, instanceId, since } = this.options;
    return publish(topics.status(instanceId), statusMessage(state, instanceId, since), { qos: 1, retain: true });
  }

  private publishSnapshot(): void {
    // A slow store: skip a beat rather than pile up.
    if (this.snapshotting || this.timer === undefined) return;
    this.snapshotting = true;
    const { publish, instanceId, snapshot, logger } = this.options;
    snapshot()
      .then((body) => publish(topics.metrics(instanceId), Buffer.from(JSON.stringify(body)), { qos: 0, retain: false }))
      .catch((err: unknown) => logger.warn({ err }, 'could not publish the metrics snapshot'))
      .finally(() => {
        this.snapshotting = false;
      });
  }
}
