import { describe, expect, it } from 'vitest';
import { defaultPullPolicy, ImageCache } from './images.js';

describe('image cache', () => {
  const sleeps: number[] = [];
  const sleep = async (ms: number) => void sleeps.push(ms);
  const hooks = { onPulling: () => undefined };

  it('the first pull of an image on a node takes the delay; then IfNotPresent finds it and Always pulls fast', async () => {
    const images = new ImageCache();
    sleeps.length = 0;
    expect((await images.ensure('n1', 'app:1', 'IfNotPresent', 5000, hooks, sleep)).kind).toBe('pulled');
    expect((await images.ensure('n1', 'app:1', 'IfNotPresent', 5000, hooks, sleep)).kind).toBe('present');
    expect((await images.ensure('n1', 'app:1', 'Always', 5000, hooks, sleep)).kind).toBe('pulled');
    expect((await images.ensure('n2', 'app:1', 'IfNotPresent', 5000, hooks, sleep)).kind).toBe('pulled'); // another node
    expect(sleeps).toEqual([5000, 5000]);
  });

  it('pulls on one node one at a time; one queued behind a pull of the same image finds it', async () => {
    const images = new ImageCache();
    const order: string[] = [];
    let release!: () => void;
    const slow = () => new Promise<void>((r) => (release = r));
    const a = images.ensure('n', 'app:1', 'IfNotPresent', 5000, { onPulling: () => order.push('a') }, slow);
    const b = images.ensure('n', 'app:1', 'IfNotPresent', 5000, { onPulling: () => order.push('b') }, sleep);
    await new Promise((r) => setTimeout(r, 10));
    expect(order).toEqual(['a']);
    release();
    await Promise.all([a, b]);
    expect(order).toEqual(['a', 'b']);
  });

  it('pull policy Never needs the image on the node; a node without a pull delay has every image', async () => {
    const images = new ImageCache();
    expect((await images.ensure('n', 'app:1', 'Never', 5000, hooks, sleep)).kind).toBe('never-pull');
    expect((await images.ensure('n', 'app:1', 'Never', 0, hooks, sleep)).kind).toBe('present');
    expect([defaultPullPolicy('sandbox-shell'), defaultPullPolicy('x:latest'), defaultPullPolicy('ghcr.io/a/b:1.2'), defaultPullPolicy('b@sha256:00')]).toEqual(['Always', 'Always', 'IfNotPresent', 'IfNotPresent']);
  });
});
