// The SCADA outputs: answers handed to UNS and Sparkplug, failures and drops, and whether this
// instance is the one publishing the Sparkplug Edge Node. Read at scrape time; 0 while neither
// output is on.
import { Counter, Gauge, type Registry } from 'prom-client';
import { PREFIX, type MetricsSources } from './common.js';

export function registerScadaState(registers: Registry[], sources: MetricsSources): void {
  const stats = (): ReturnType<NonNullable<MetricsSources['scada']>> => sources.scada?.();
  const counter = (name: string, help: string, read: (s: NonNullable<ReturnType<typeof stats>>) => number): void => {
    new Counter({
      name: `${PREFIX}${name}`,
      help,
      registers,
      collect() {
        this.reset();
        const s = stats();
        if (s) this.inc(read(s));
      },
    });
  };
  counter('scada_answers_total', 'Template answers published in the UNS and/or handed to the Sparkplug Edge Node', (s) => s.answers);
  counter(
    'scada_failures_total',
    'SCADA output steps that failed (a UNS publish, a last good answer kept or read, a hand-over to the Edge Node)',
    (s) => s.failures,
  );
  counter('scada_dropped_total', 'Template answers not published: more device-templates waiting than the outputs hold', (s) => s.dropped);
  new Gauge({
    name: `${PREFIX}sparkplug_publishing`,
    help: '1 while this instance holds the Sparkplug Edge Node lease and its NBIRTH is out, else 0',
    registers,
    collect() {
      this.reset();
      this.set(stats()?.sparkplugPublishing === true ? 1 : 0);
    },
  });
}
