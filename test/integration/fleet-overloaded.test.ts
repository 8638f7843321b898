import { Logger } from '@nestjs/common';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission } from '../../src/execution/admission.js';
import { SlotDispatcher } from '../../src/execution/slot.dispatcher.js';
import { FLEET_SCRIPTS, RedisFleetCoordination } from '../../src/leasing/fleet.coordination.js';
import { RedisScriptRunner } from '../../src/leasing/redis-script.runner.js';
import { integrationSetup } from '../support/integration.setup.js';
import { uniqueName, waitFor } from '../support/services.js';

const { redis } = integrationSetup({ redis: true });
const dispatchers: SlotDispatcher[] = [];
afterEach(async () => {
  await Promise.all(dispatchers.splice(0).map((d) => d.stop()));
});

function fleetOnRedis(prefix: string): RedisFleetCoordination {
  return new RedisFleetCoordination(redis, new RedisScriptRunner(redis, 2_000, Object.values(FLEET_SCRIPTS)), prefix);
}

async function instance(fleet: RedisFleetCoordination, id: string): Promise<{ dispatcher: SlotDispatcher; admission: Admission }> {
  const admission = new Admission({ clock: () => Date.now(), logger: new Logger('test') });
  const dispatcher = new SlotDispatcher(fleet, id, 'g', new Logger('test'), undefined, admission);
  dispatchers.push(dispatcher);
  await dispatcher.start();
  return { dispatcher, admission };
}

describe("the fleet's member list says which instances are overloaded", () => {
  it('an entry renewed as overloaded is listed apart, and cleared by the next renewal that is not, or by leaving', async () => {
    const fleet = fleetOnRedis(uniqueName('members'));
    expect((await fleet.heartbeat('g|a', 6_000, true)).sort()).toEqual(['!busy|g|a', 'g|a']);
    expect((await fleet.heartbeat('g|b', 6_000)).sort()).toEqual(['!busy|g|a', 'g|a', 'g|b']);
    expect((await fleet.heartbeat('g|a', 6_000, false)).sort()).toEqual(['g|a', 'g|b']);
    await fleet.heartbeat('g|a', 6_000, true);
    await fleet.leave('g|a');
    expect(await fleet.heartbeat('g|b', 6_000)).toEqual(['g|b']);
  });

  it('an instance that becomes overloaded says so within a fraction of a second; the others rank it as before', async () => {
    const fleet = fleetOnRedis(uniqueName('busy'));
    const a = await instance(fleet, 'a');
    const b = await instance(fleet, 'b');
    await waitFor(() => b.admission.roster.alive('a') === true, { timeoutMs: 2_000, message: 'b sees a' });
    expect(b.admission.roster.overloaded('a')).toBe(false);

    a.admission.noteShed('some-job', 'not started: this instance was overloaded (test)');
    const since = Date.now();
    await waitFor(() => b.admission.roster.overloaded('a') === true, { timeoutMs: 2_000, message: 'b learns that a is overloaded' });
    // a's own look (every 250 ms) and b's next read of the list (every 200 ms while starting up).
    expect(Date.now() - since).toBeLessThan(1_000);
    expect(b.admission.roster.overloaded('b')).toBe(false);
    expect(a.admission.roster.overloaded('a')).toBe(true);
    // The busy entry is no member: both still rank over the same two instances.
    expect((b.dispatcher as unknown as { members: string[] }).members).toEqual(['a', 'b']);
    expect((a.dispatcher as unknown as { members: string[] }).members).toEqual(['a', 'b']);
  });
});
