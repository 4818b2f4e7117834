// The dashboard in a real headless Chromium, against a running bridge under load from the
// device simulator: what an operator sees. Figures move, a device is found by search, and a
// dead letter is replayed with the admin token and refused with a wrong one. With
// DASHBOARD_SCREENSHOTS=dir, screenshots of the page under load are written there (docs/images).
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFleet } from '../../device-sim/fleet.js';
import { launchBrowser } from '../helpers/browser.js';
import { ask, startHarness, type Harness } from '../helpers/harness.js';

const TOKEN = 'browser-test-token-7f3a9c';
const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS;

describe('dashboard in Chromium', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let load: Promise<unknown> | undefined;
  const errors: string[] = [];

  beforeAll(async () => {
    h = await startHarness({ ADMIN_TOKEN: TOKEN, RATE_LIMIT_RPM: '100000', DEVICE_RATE_LIMIT_RPM: '100000' }, { latencyMs: 40, jitterMs: 20 }, undefined, {
      bridge: { dashboardTickMs: 500 },
    });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1366, height: 768 } });
    page.on('pageerror', (err) => errors.push(String(err)));
    page.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(msg.text());
    });
    await page.goto(`http://127.0.0.1:${h.bridge.httpPort}/`);
  }, 30_000);

  afterAll(async () => {
    await browser?.close();
    await load?.catch(() => undefined);
    await h?.close();
  }, 90_000);

  it('asks for the token first, then shows the fleet and its figures moving', { timeout: 90_000 }, async () => {
    await expect.poll(() => page.locator('#token').isVisible()).toBe(true);
    await page.fill('#token', TOKEN);
    await page.click('#token-apply');
    await expect.poll(() => page.locator('#instance-rows tr').count(), { timeout: 10_000 }).toBe(1);
    expect(await page.textContent('#instance-rows')).toContain(h.bridge.instanceId);
    // The load starts once the page shows the fleet, so it is still running when the figures are read.
    const mix = { critical: 1, high: 9, normal: 80, low: 10 };
    load = runFleet({ url: h.url, devices: 20, rate: 40, durationS: SCREENSHOTS ? 60 : 20, mix, qos: 1, prefix: 'line2-cam' });
    await expect.poll(async () => Number(await page.textContent('#total-rps')), { timeout: 15_000 }).toBeGreaterThan(5);
    const before = await page.textContent('#updated-at');
    await expect.poll(() => page.textContent('#updated-at'), { timeout: 5000 }).not.toBe(before);
    expect(await page.locator('#chart-rps canvas').count()).toBe(1);
    expect(await page.textContent('#provider-rows')).toContain('primary');
    await expect.poll(async () => (await page.textContent('#cost'))?.includes('line2-cam'), { timeout: 35_000 }).toBe(true);
    if (SCREENSHOTS) {
      await page.waitForTimeout(8000); // more points in the charts
      await page.screenshot({ path: join(SCREENSHOTS, 'dashboard.png') });
      await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-full.png'), fullPage: true });
    }
  });

  it('finds a device by part of its id and shows its recent requests', async () => {
    await page.fill('#device-search', 'cam-07');
    await page.click('#device-find');
    await expect.poll(() => page.textContent('#device-results'), { timeout: 5000 }).toContain('line2-cam-07');
    expect(await page.locator('#device-results tbody tr').count()).toBeGreaterThan(0);
    expect(await page.textContent('#device-results')).toContain('ok');
  });

  it('replays a dead letter with the token, after refusing it with a wrong one', { timeout: 30_000 }, async () => {
    const device = await h.device('cam-dlq');
    h.upstream.script({ status: 500 }, { status: 500 }, { status: 500 }); // every attempt fails: a replay could answer it
    await device.publish('high', ask('dead-7'));
    expect((await device.reply('dead-7'))[0]).toMatchObject({ ok: false, error: { code: 'upstream_error' } });
    const row = page.locator('#dlq-rows tr[data-key="cam-dlq/dead-7"]');
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);

    await page.fill('#token', 'not-the-token');
    await page.click('#token-apply');
    await row.locator('button.replay').click();
    await page.click('#confirm-ok');
    await expect.poll(() => page.textContent('#dlq-result'), { timeout: 5000 }).toContain('token required or wrong');
    expect(h.upstream.requests.filter((r) => JSON.stringify(r.body).includes('question dead-7'))).toHaveLength(3); // MAX_ATTEMPTS, no replay

    await page.fill('#token', TOKEN);
    await page.click('#token-apply');
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1);
    await row.locator('button.replay').click();
    await page.click('#confirm-ok');
    await expect.poll(() => page.textContent('#dlq-result'), { timeout: 5000 }).toContain('replayed 1');
    const [, replayed] = await device.reply('dead-7', { count: 2 });
    expect(replayed).toMatchObject({ id: 'dead-7', ok: true });
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(0);
    expect(errors.filter((e) => !e.includes('401'))).toEqual([]);
  });
});
