// Every generator, one per input kind, and the stream of actions one attacker draws from
// them: fast-check arbitraries sampled with a seed, so a seed replays the same inputs.
import fc from 'fast-check';
import type { Action, Kind } from './actions.js';
import { cborPayload } from './cbor.js';
import { badTopic, duplicates, identity, imagePublish, ownInfer, properties, publish, raw, session, subscribe, templatePayload } from './mqtt.js';
import { bigJson, hostileFields, mutatedRequest, validChat, type InputContext } from './values.js';

export type { InputContext } from './values.js';

const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
const text = (s: string): Buffer => Buffer.from(s);

function generators(ctx: InputContext): Record<Kind, fc.Arbitrary<Omit<Action, 'kind'>>> {
  const own = ownInfer(ctx);
  const cborType = fc.oneof(
    { weight: 9, arbitrary: fc.constant({ contentType: 'application/cbor' }) },
    { weight: 1, arbitrary: fc.constantFrom({ contentType: 'application/CBOR' }, { contentType: 'application/cbor; x=1' }, {}) },
  );
  return {
    'json-random': publish(own, fc.json({ maxDepth: 6 }).map(text)),
    'json-mutated': publish(own, mutatedRequest.map(json)),
    'json-deep': publish(own, bigJson(ctx).map(text)),
    'request-fields': publish(own, hostileFields.map(json)),
    bytes: publish(
      own,
      fc.oneof(
        fc.uint8Array({ maxLength: 8192 }).map((b) => Buffer.from(b)),
        fc.string({ unit: 'grapheme', maxLength: 2000 }).map(text),
        fc.string({ unit: 'binary', maxLength: 2000 }).map(text),
      ),
    ),
    cbor: publish(own, cborPayload(ctx), cborType),
    template: publish(own, templatePayload(ctx)),
    image: imagePublish(ctx),
    topic: publish(badTopic(ctx), validChat.map(json)),
    properties: publish(own, fc.oneof(validChat.map(json), hostileFields.map(json)), properties(ctx)),
    duplicate: duplicates(ctx),
    session: session(ctx),
    subscribe: subscribe(ctx),
    raw: raw(ctx),
    identity: identity(ctx),
  };
}

/** Endless actions for one attacker: batches sampled from one arbitrary, each batch seeded from `seed`. */
export class ActionStream {
  private readonly arbitrary: fc.Arbitrary<Action>;
  private batch: Action[] = [];
  private batchNumber = 0;

  constructor(
    ctx: InputContext,
    private readonly seed: number,
    kinds: readonly Kind[],
  ) {
    const all = generators(ctx);
    this.arbitrary = fc.oneof(...kinds.map((kind) => all[kind].map((a) => ({ ...a, kind }) as Action)));
  }

  next(): Action {
    if (this.batch.length === 0) {
      // Batch seeds are spread so that attackers with neighbouring seeds do not share inputs.
      const seed = (Math.imul(this.seed ^ 0x5bd1e995, 0x27d4eb2d) + this.batchNumber * 7919) | 0;
      this.batch = fc.sample(this.arbitrary, { seed, numRuns: 32 }).reverse();
      this.batchNumber += 1;
    }
    return this.batch.pop() as Action;
  }
}
