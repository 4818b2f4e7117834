// The SCADA outputs' entry: every template reply passes here on its way to the device. Answers
// of templates with `output` are kept (last good), published in the plant's namespace (UNS)
// and handed to the Sparkplug Edge Node's publisher, whichever instance that is. Never throws
// and never holds the reply up: the work runs after, one device-template at a time, so a tag's
// publishes leave in answer order even when the store's reads interleave.
import type { ScadaAnswer } from '../../contract/index.js';
import type { Logger } from '../logger.js';
import type { ScadaState } from '../store/scada-state.js';
import { scadaAnswerOf, type AnswerSink, type TemplateAnswer } from './answers.js';
import type { UnsPublisher } from './uns.js';

/** Device-templates being worked on at once; an answer past it is dropped (counted, logged). */
const MAX_BUSY_TAGS = 10_000;
/** A failure is logged at most this often (a Redis or broker outage would otherwise flood the log). */
const LOG_EVERY_MS = 10_000;

export interface ScadaOutputsOptions {
  state: ScadaState;
  /** Set when CONFIG_FILE has `uns`. */
  uns?: UnsPublisher | undefined;
  /** Sparkplug on: every answer is announced to the Edge Node's publisher. */
  sparkplug: boolean;
  /** Whether the template declares `output` (read at each answer: SIGHUP may change it). */
  hasOutput(template: string): boolean;
  logger: Logger;
  clock?: () => number;
}

/** One device-template's work: the newest answer waiting, and the newest good one not yet kept. */
interface Slot {
  latest: ScadaAnswer | undefined;
  good: ScadaAnswer | undefined;
  done: Promise<void>;
}

export class ScadaOutputs implements AnswerSink {
  private readonly slots = new Map<string, Slot>();
  private readonly clock: () => number;
  private loggedAt = -Infinity;
  private unlogged = 0;
  /** Answers published or announced, and failures (metrics, tests). */
  readonly counts = { answers: 0, failures: 0, dropped: 0 };

  constructor(private readonly options: ScadaOutputsOptions) {
    this.clock = options.clock ?? Date.now;
  }

  answered(answer: TemplateAnswer): void {
    try {
      const scada = scadaAnswerOf(answer, this.options.hasOutput(answer.template));
      if (scada !== undefined) this.enqueue(scada);
    } catch (err) {
      this.failed(err, 'could not take a template answer for SCADA');
    }
  }

  /** Resolves once the work taken so far is done (a stop waits for it before the broker closes). */
  async idle(): Promise<void> {
    while (this.slots.size > 0) await Promise.all([...this.slots.values()].map((slot) => slot.done));
  }

  /**
   * A newer answer replaces one still waiting (SCADA reads the latest state), keeping the
   * newest good one aside so it is still kept as the last good: at most two per tag.
   */
  private enqueue(answer: ScadaAnswer): void {
    const key = `${answer.deviceId}/${answer.template}`;
    const slot = this.slots.get(key);
    if (slot !== undefined) {
      slot.latest = answer;
      if (answer.quality === 'good') slot.good = answer;
      return;
    }
    if (this.slots.size >= MAX_BUSY_TAGS) {
      this.counts.dropped += 1;
      this.failed(new Error(`more than ${MAX_BUSY_TAGS} tags waiting`), 'SCADA answer dropped');
      return;
    }
    const fresh: Slot = { latest: answer, good: answer.quality === 'good' ? answer : undefined, done: Promise.resolve() };
    this.slots.set(key, fresh);
    fresh.done = this.drain(key, fresh);
  }

  private async drain(key: string, slot: Slot): Promise<void> {
    // After the reply: nothing here runs within Results.send.
    await Promise.resolve();
    try {
      for (let answer = slot.latest; answer !== undefined; answer = slot.latest) {
        const good = slot.good;
        slot.latest = undefined;
        slot.good = undefined;
        await this.handle(answer, good).catch((err: unknown) => this.failed(err, 'SCADA output failed'));
      }
    } finally {
      this.slots.delete(key);
    }
  }

  private async handle(answer: ScadaAnswer, good: ScadaAnswer | undefined): Promise<void> {
    const { state, uns, sparkplug } = this.options;
    if (good !== undefined) await state.keepGood(good).catch((err: unknown) => this.failed(err, 'could not keep a last good SCADA answer'));
    const out = answer.quality === 'good' ? answer : await this.withLastGood(answer, good);
    this.counts.answers += 1;
    if (uns !== undefined) await uns.publish(out).catch((err: unknown) => this.failed(err, 'could not publish a UNS tag'));
    if (sparkplug)
      await state.announce({ kind: 'answer', answer: out }).catch((err: unknown) => this.failed(err, 'could not hand an answer to the Sparkplug publisher'));
  }

  /** A failure keeps showing the last good values, marked bad. */
  private async withLastGood(answer: ScadaAnswer, good: ScadaAnswer | undefined): Promise<ScadaAnswer> {
    let last = good;
    if (last === undefined) {
      last = await this.options.state.lastGood(answer.deviceId, answer.template).catch((err: unknown) => {
        this.failed(err, 'could not read a last good SCADA answer');
        return undefined;
      });
    }
    return last?.data === undefined ? answer : { ...answer, data: last.data };
  }

  private failed(err: unknown, message: string): void {
    this.counts.failures += 1;
    const now = this.clock();
    if (now - this.loggedAt < LOG_EVERY_MS) {
      this.unlogged += 1;
      return;
    }
    this.loggedAt = now;
    this.options.logger.warn({ err, alsoFailedSinceLastLog: this.unlogged }, message);
    this.unlogged = 0;
  }
}
