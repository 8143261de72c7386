import { describe, expect, it } from 'vitest';
import { aNode, aWorkerPod } from '../../../testing/builders.js';
import { checkTimeoutsAnnotation, containerCheckSchema, containerChecksOf, containerChecksSchema } from './container-checks.js';

const problems = (input: unknown) => {
  const parsed = containerChecksSchema.safeParse(input);
  return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('containerChecksSchema', () => {
  it('fills the defaults: no command or args (the image\'s own), small resources, a 60s timeout', () => {
    expect(containerCheckSchema.parse({ name: 'gpu', image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04' })).toEqual({
      name: 'gpu',
      image: 'nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04',
      command: [],
      args: [],
      env: [],
      resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '128Mi' } },
      timeout: 60_000,
    });
    expect(containerChecksSchema.parse(undefined)).toEqual([]);
  });

  it('takes extended resources (nvidia.com/gpu) and a timeout as a duration', () => {
    const check = containerCheckSchema.parse({ name: 'gpu', image: 'cuda:12', resources: { limits: { 'nvidia.com/gpu': '1' } }, timeout: '2m', env: [{ name: 'X', value: '1' }] });
    expect(check.resources.limits).toEqual({ 'nvidia.com/gpu': '1' });
    expect(check.timeout).toBe(120_000);
  });

  it.each([
    [[{ name: 'GPU', image: 'x' }], 'expected a lowercase DNS label'],
    [[{ name: 'dns', image: 'x' }], 'names a built-in check or the worker container'],
    [[{ name: 'http', image: 'x' }], 'names a built-in check'],
    [[{ name: 'worker', image: 'x' }], 'the worker container'],
    [[{ name: 'a', image: 'x' }, { name: 'a', image: 'y' }], '1.name: container check "a" is defined twice'],
    [[{ name: 'a', image: '' }], 'image'],
    [[{ name: 'a', image: 'x', timeout: '0s' }], 'at least 1000ms'],
    [[{ name: 'a', image: 'x', resources: { limits: { memory: 'lots' } } }], 'quantity'],
    [[{ name: 'a', image: 'x', privileged: true }], 'privileged'],
  ])('refuses %j', (input, text) => {
    expect(problems(input).join('\n')).toContain(text);
  });
});

describe('check timeouts on the pod', () => {
  const checks = [containerCheckSchema.parse({ name: 'gpu', image: 'cuda:12', timeout: '30s' }), containerCheckSchema.parse({ name: 'disk', image: 'busybox:1' })];

  it('are written as durations and read back per container; a container without one gets the fallback', () => {
    expect(checkTimeoutsAnnotation(checks)).toBe('{"gpu":"30s","disk":"1m"}');
    const pod = aWorkerPod(aNode('n1').build(), 1, undefined, checks).build();
    expect(containerChecksOf(pod, 5_000)).toEqual([{ name: 'gpu', timeoutMs: 30_000 }, { name: 'disk', timeoutMs: 60_000 }]);
    pod.metadata!.annotations!['kube-node-ready.io/check-timeouts'] = 'not json';
    expect(containerChecksOf(pod, 5_000)).toEqual([{ name: 'gpu', timeoutMs: 5_000 }, { name: 'disk', timeoutMs: 5_000 }]);
  });

  it('a pod with the worker alone has none', () => {
    expect(containerChecksOf(aWorkerPod(aNode('n1').build()).build(), 5_000)).toEqual([]);
  });
});
