import { describe, expect, it } from 'vitest';
import type { k8s } from '../kube.js';
import { podStatus, type ContainerView, type PodView } from './pod-status.js';

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T00:00:05.000Z';

function pod(spec: Partial<k8s.V1PodSpec>): k8s.V1Pod {
  return { metadata: { name: 'p', uid: 'u' }, spec: { containers: [{ name: 'main', image: 'sandbox-shell' }], ...spec } };
}
const view = (containers: ContainerView[], o: Partial<PodView> = {}): PodView => ({ uid: 'u', sandboxReady: true, deadlineExceeded: false, containers, ...o });
const running = (name: string, o: Partial<ContainerView> = {}): ContainerView => ({ name, restartCount: 0, proc: {}, startedAt: T0, ready: true, started: true, ...o });
const exited = (name: string, exitCode: number, o: Partial<ContainerView> = {}): ContainerView => ({ name, restartCount: 0, proc: {}, startedAt: T0, finishedAt: T1, exitCode, reason: exitCode ? 'Error' : 'Completed', ...o });
const conditions = (r: ReturnType<typeof podStatus>) => Object.fromEntries(r.conditions.map((c) => [c.type, c.status]));

describe('pod status (a kubelet generateAPIPodStatus / getPhase)', () => {
  it.each<[string, k8s.V1Pod, PodView, string, Record<string, string>]>([
    ['no sandbox yet: Pending', pod({}), view([{ name: 'main', restartCount: 0 }], { sandboxReady: false }), 'Pending', { PodReadyToStartContainers: 'False', Initialized: 'True', Ready: 'False' }],
    ['running and ready', pod({}), view([running('main')]), 'Running', { Ready: 'True', ContainersReady: 'True' }],
    ['running, readiness probe not passed: not Ready', pod({}), view([running('main', { ready: false })]), 'Running', { Ready: 'False', ContainersReady: 'False' }],
    ['running, startup probe not passed: not Ready', pod({}), view([running('main', { started: false })]), 'Running', { Ready: 'False' }],
    ['Never, exit 0: Succeeded', pod({ restartPolicy: 'Never' }), view([exited('main', 0)]), 'Succeeded', { Ready: 'False' }],
    ['Never, exit 1: Failed', pod({ restartPolicy: 'Never' }), view([exited('main', 1)]), 'Failed', { Ready: 'False' }],
    ['Always, in back-off: Running', pod({}), view([exited('main', 1, { restartCount: 1, waiting: { reason: 'CrashLoopBackOff' } })]), 'Running', { Ready: 'False' }],
    [
      'an init container running: Pending, not Initialized',
      pod({ initContainers: [{ name: 'init', image: 'x' }] }),
      view([running('init', { init: 'init' }), { name: 'main', restartCount: 0 }]),
      'Pending',
      { Initialized: 'False', Ready: 'False' },
    ],
    [
      'an init container failed, restartPolicy Never: Failed',
      pod({ restartPolicy: 'Never', initContainers: [{ name: 'init', image: 'x' }] }),
      view([exited('init', 3, { init: 'init' }), { name: 'main', restartCount: 0 }]),
      'Failed',
      { Initialized: 'False' },
    ],
    [
      'an init container failed, restartPolicy Always: Pending while it is retried',
      pod({ initContainers: [{ name: 'init', image: 'x' }] }),
      view([exited('init', 3, { init: 'init', restartCount: 1, waiting: { reason: 'CrashLoopBackOff' } }), { name: 'main', restartCount: 0 }]),
      'Pending',
      { Initialized: 'False' },
    ],
    [
      'init containers done, container running: Running, Initialized',
      pod({ initContainers: [{ name: 'init', image: 'x' }] }),
      view([exited('init', 0, { init: 'init' }), running('main')]),
      'Running',
      { Initialized: 'True', Ready: 'True' },
    ],
  ])('%s', (_name, p, v, phase, want) => {
    const r = podStatus(p, v, {}, T1);
    expect(r.phase).toBe(phase);
    expect(conditions(r)).toMatchObject(want);
  });

  it('reports init containers apart, with PodInitializing as the default waiting reason, and a completed one ready', () => {
    const p = pod({ initContainers: [{ name: 'a', image: 'x' }, { name: 'b', image: 'x' }] });
    const r = podStatus(p, view([exited('a', 0, { init: 'init' }), running('b', { init: 'init' }), { name: 'main', restartCount: 0 }]), {}, T1);
    expect(r.initContainerStatuses.map((s) => [s.name, Object.keys(s.state!)[0], s.ready])).toEqual([
      ['a', 'terminated', true],
      ['b', 'running', false],
    ]);
    expect(r.containerStatuses[0]!.state).toEqual({ waiting: { reason: 'PodInitializing' } });
    expect(r.conditions.find((c) => c.type === 'Initialized')).toMatchObject({ reason: 'ContainersNotInitialized', message: 'containers with incomplete status: [b]' });
  });

  it('shows the run before as lastState, in back-off and once running again', () => {
    const backoff = podStatus(pod({}), view([exited('main', 137, { restartCount: 1, waiting: { reason: 'CrashLoopBackOff' } })]), {}, T1);
    expect(backoff.containerStatuses[0]).toMatchObject({ restartCount: 1, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 137 } } });
    const again = podStatus(pod({}), view([running('main', { restartCount: 1, lastTerminated: { exitCode: 137, reason: 'Error' } })]), {}, T1);
    expect(again.containerStatuses[0]).toMatchObject({ ready: true, state: { running: { startedAt: T0 } }, lastState: { terminated: { exitCode: 137 } } });
  });

  it('keeps a condition lastTransitionTime until its status changes', () => {
    const first = podStatus(pod({}), view([running('main', { ready: false })]), {}, T0);
    const same = podStatus(pod({}), view([running('main', { ready: false })]), first.memory, T1);
    expect(same.conditions.find((c) => c.type === 'Ready')!.lastTransitionTime).toBe(T0);
    const flipped = podStatus(pod({}), view([running('main')]), same.memory, T1);
    expect(flipped.conditions.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True', lastTransitionTime: T1 });
  });

  it('an active deadline fails the pod', () => {
    const r = podStatus(pod({}), view([exited('main', 137)], { deadlineExceeded: true }), {}, T1);
    expect([r.phase, r.reason]).toEqual(['Failed', 'DeadlineExceeded']);
  });
});
