// Chaos: SIGKILL of a bridge process that is the Sparkplug Edge Node. On the plant's broker its
// Will is the NDEATH (the bdSeq of its NBIRTH); in a fleet (Redis + Mosquitto) the other
// instance takes the lease and births with the next bdSeq and every device's current values.
// The real scada-sim host (--check) watches the fleet's takeover beside the test's observer;
// neither may see a broken session rule. The takeover gap is printed, not asserted.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startMosquitto } from '../helpers/mosquitto.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { scripted } from '../helpers/scripted-upstream.js';
import { tempDir } from '../helpers/security.js';
import { metricValue, observe, scadaSim, type ScadaSimRun } from '../helpers/sparkplug-observer.js';
import { eventually } from '../helpers/wait.js';

const GROUP = 'plant';
const ANSWER = { reject: true, score: 0.25 };
const INSPECT = {
  messages: [{ role: 'user', content: 'Part {{part}}: reject?' }],
  output: { type: 'object', properties: { reject: { type: 'boolean' }, score: { type: 'number' } }, required: ['reject', 'score'] },
};
const COMPLETION = {
  body: {
    id: 'c1',
    object: 'chat.completion',
    model: 'm',
    choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: JSON.stringify(ANSWER) } }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  },
};

describe('chaos: kill -9 of the Sparkplug Edge Node', () => {
  it("plant's broker: the broker publishes the NDEATH Will with the bdSeq of the NBIRTH", { timeout: 40_000 }, async () => {
    const mosquitto = await startMosquitto();
    const host = await observe(mosquitto.url, GROUP);
    let service: ServiceProcess | undefined;
    try {
      service = await startServiceProcess({ BROKER_URL: mosquitto.url, INSTANCE_ID: 'spb-crash', SPARKPLUG_GROUP_ID: GROUP, SPARKPLUG_EDGE_NODE_ID: 'n1' });
      const [birth] = await host.wait('NBIRTH', 1, undefined, 15_000);
      const bdSeq = metricValue(birth!, 'bdSeq');
      await service.stop('SIGKILL');
      const [death] = await host.wait('NDEATH', 1, undefined, 15_000);
      expect(metricValue(death!, 'bdSeq')).toBe(bdSeq);
      expect(death!.qos).toBe(1);
      expect(death!.retain).toBe(false);
      expect(host.violations()).toEqual([]);
    } finally {
      await service?.stop('SIGKILL');
      await host.close();
      await mosquitto.close();
    }
  });

  it(
    'fleet: after kill -9 of the publishing instance the other births with the next bdSeq and the device answered, scada-sim sees no violation',
    { timeout: 60_000 },
    async () => {
      const mosquitto = await startMosquitto();
      const prefix = uniquePrefix('spb-fleet');
      const dir = tempDir('eab-spb-chaos-');
      const configFile = join(dir.path, 'config.json');
      writeFileSync(configFile, JSON.stringify({ templates: { inspect: INSPECT } }));
      const upstream = await scripted([COMPLETION]);
      const host = await observe(mosquitto.url, GROUP);
      const device = await mqtt.connectAsync(mosquitto.url, { clientId: 'cam-1', reconnectPeriod: 0 });
      const services: ServiceProcess[] = [];
      let sim: ScadaSimRun | undefined;
      const env = {
        BROKER_URL: mosquitto.url,
        REDIS_URL,
        REDIS_PREFIX: prefix,
        SPARKPLUG_GROUP_ID: GROUP,
        UPSTREAM_URL: upstream.url,
        CONFIG_FILE: configFile,
      };
      try {
        // Online before the fleet: it sees the first NBIRTH, as SCADA would.
        sim = await scadaSim(['--url', mosquitto.url, '--host-id', 'scada-chaos', '--group', GROUP, '--check']);
        for (const id of ['spb-a', 'spb-b']) {
          const s = await startServiceProcess({ ...env, INSTANCE_ID: id });
          services.push(s);
          await eventually(`${id} subscribed`, () => s.logs.some((l) => l.msg === 'subscribed'), 10_000);
        }
        const [birth] = await host.wait('NBIRTH', 1, undefined, 15_000);
        expect(birth!.topic).toBe(`spBv1.0/${GROUP}/NBIRTH/${prefix}`);

        const replies: string[] = [];
        device.on('message', (_t, payload) => replies.push(payload.toString()));
        await device.subscribeAsync('devices/cam-1/result', { qos: 1 });
        await device.publishAsync('devices/cam-1/infer/normal', JSON.stringify({ id: 'q1', template: 'inspect', vars: { part: 'A1' } }), { qos: 1 });
        const [first] = await host.wait('DBIRTH', 1, 'cam-1', 15_000);
        expect(metricValue(first!, 'AI/inspect/score')).toBe(ANSWER.score);
        await eventually('the reply', () => replies.length > 0);
        expect(JSON.parse(replies[0] ?? '{}')).toMatchObject({ id: 'q1', ok: true, data: ANSWER });

        const holder = services.find((s) => s.logs.some((l) => String(l.msg).includes('lease taken'))) as ServiceProcess;
        const killedAt = Date.now();
        await holder.stop('SIGKILL');
        const [death] = await host.wait('NDEATH', 1, undefined, 20_000);
        expect(metricValue(death!, 'bdSeq')).toBe(metricValue(birth!, 'bdSeq'));
        const second = (await host.wait('NBIRTH', 2, undefined, 20_000))[1]!;
        expect(metricValue(second, 'bdSeq')).toBe((Number(metricValue(birth!, 'bdSeq')) + 1) % 256);
        expect(host.of('NBIRTH')).toHaveLength(2);
        console.info(`takeover gap: ${second.atMs - killedAt} ms`);
        // The successor births the device from the fleet's last good answers, after its NBIRTH.
        const reborn = (await host.wait('DBIRTH', 2, 'cam-1', 10_000))[1]!;
        expect(host.seen.indexOf(death!)).toBeLessThan(host.seen.indexOf(second));
        expect(host.seen.indexOf(second)).toBeLessThan(host.seen.indexOf(reborn));
        expect(reborn.seq).toBe(1);
        expect(metricValue(reborn, 'AI/inspect/score')).toBe(ANSWER.score);
        expect(metricValue(reborn, 'AI/inspect/requestId')).toBe('q1');
        expect(host.violations()).toEqual([]);

        const dbirths = `spBv1.0/${GROUP}/DBIRTH/${prefix}/cam-1`;
        await eventually('both DBIRTHs at scada-sim', () => sim!.output().split(dbirths).length === 3, 10_000);
        const { code, report } = await sim.stop();
        expect(code).toBe(0);
        expect(report?.first).toBeNull();
        expect(report?.rebirths).toEqual([]);
        const tag = (source: string, metric: string) => report?.tags.find((t) => t.source === source && t.metric === metric);
        expect(tag(`${GROUP}/${prefix}`, 'bdSeq')).toMatchObject({ value: metricValue(second, 'bdSeq'), quality: 'good' });
        expect(tag(`${GROUP}/${prefix}/cam-1`, 'AI/inspect/reject')).toMatchObject({ value: true, type: 'Boolean', quality: 'good' });
      } finally {
        await sim?.stop();
        for (const s of services) await s.stop('SIGKILL');
        await device.endAsync(true);
        await host.close();
        await upstream.close();
        await mosquitto.close();
        dir.remove();
        const redis = connectRedis();
        await deletePrefix(redis, prefix);
        redis.disconnect();
      }
    },
  );
});
