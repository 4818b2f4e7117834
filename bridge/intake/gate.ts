// The broker port's request handler, bound before intake exists: requests that arrive first
// (the plant's broker delivers what waited in the bridge's session as soon as it connects)
// wait for intake rather than being acknowledged. A start that fails before intake exists
// leaves them unacknowledged, so the broker keeps them.
import { pubackReasonOf, type RequestHandler } from '../../contract/index.js';
import type { Intake } from './intake.js';

export class IntakeGate {
  private intake: Intake | undefined;
  private observer: { cacheHit(): void } = { cacheHit: () => undefined };
  private opened: (intake: Intake) => void = () => {};
  private readonly ready = new Promise<Intake>((resolve) => (this.opened = resolve));

  readonly handler: RequestHandler = async (request) => {
    const result = await (this.intake ?? (await this.ready)).handle(request);
    if (result.outcome === 'cached') this.observer.cacheHit();
    if (result.outcome === 'rejected') return { reasonCode: pubackReasonOf(result.error.code), reasonString: result.error.message };
    return undefined;
  };

  /** Lets the waiting requests in; `observer` counts answers served from the cache. */
  open(intake: Intake, observer: { cacheHit(): void }): void {
    this.observer = observer;
    this.intake = intake;
    this.opened(intake);
  }
}
