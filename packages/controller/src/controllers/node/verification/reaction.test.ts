import { describe, expect, it } from 'vitest';
import { ReactionClock } from './reaction.js';

function setup() {
  const clock = { t: 1_000, now: () => clock.t };
  const observed: Array<[string, number]> = [];
  const reactions = new ReactionClock(clock, (step, seconds) => observed.push([step, seconds]));
  return { clock, observed, reactions };
}

describe('ReactionClock', () => {
  it('times each step from its first start to its stop, per node', () => {
    const { clock, observed, reactions } = setup();
    reactions.start('launch', 'a');
    clock.t += 200;
    reactions.start('launch', 'a'); // a later event for the same step does not restart it
    reactions.start('open', 'a');
    clock.t += 300;
    reactions.stop('launch', 'a');
    reactions.stop('launch', 'a'); // stopped once
    reactions.stop('open', 'b'); // never started: nothing
    clock.t += 500;
    reactions.stop('open', 'a');
    expect(observed).toEqual([
      ['launch', 0.5],
      ['open', 0.8],
    ]);
  });

  it('a reconcile that began before the event cannot cancel the clock the event started', () => {
    const { clock, observed, reactions } = setup();
    const reconcileBegan = clock.now();
    clock.t += 10;
    reactions.start('launch', 'a');
    reactions.cancel('launch', 'a', reconcileBegan); // decided on the copy before the event: kept
    clock.t += 40;
    reactions.stop('launch', 'a');
    reactions.start('launch', 'a');
    reactions.cancel('launch', 'a', clock.now()); // decided after it (the node must wait): cancelled
    reactions.stop('launch', 'a');
    expect(observed).toEqual([['launch', 0.04]]);
  });

  it('forgets a node', () => {
    const { observed, reactions } = setup();
    reactions.start('launch', 'a');
    reactions.start('open', 'a');
    reactions.start('launch', 'b');
    reactions.forget('a');
    reactions.stop('launch', 'a');
    reactions.stop('open', 'a');
    reactions.stop('launch', 'b');
    expect(observed.map(([step]) => step)).toEqual(['launch']);
  });
});
