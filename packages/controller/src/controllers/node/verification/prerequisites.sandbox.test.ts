// The start-up check of the worker's prerequisites against the real API server: a ServiceAccount
// and a PriorityClass that do not exist are named in one warning line, with the commands that
// create them; the namespace and the CRD, which exist, are not; and the controller starts.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { harness, type Harness } from '../../../../test/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await harness('ctlprereq');
});

afterAll(async () => {
  await h?.cleanup();
});

it('a controller whose worker ServiceAccount and PriorityClass are missing names them in one warning line and starts', async () => {
  const absent = `knr-absent-${h.id}`;
  const ctl = await h.start({ worker: { serviceAccountName: absent, priorityClassName: absent } });
  const lines = ctl.logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('worker prerequisites'));
  expect(lines.map((l) => l.level)).toEqual(['warn']);
  const msg = lines[0]?.msg as string;
  expect(msg).toMatch(
    new RegExp(
      `^worker prerequisites missing: ServiceAccount "${h.namespace}/${absent}": create it with \`kubectl -n ${h.namespace} create serviceaccount ${absent}\`; ` +
        `PriorityClass "${absent}": create it with \`kubectl create priorityclass ${absent} --value=1000000000 --preemption-policy=Never --description=".*"\`\\. No node is verified`,
    ),
  );
  expect(msg).not.toMatch(/namespace "|CRD|Cannot check/);
  // It started all the same: serving, and leading (alone, with leader election).
  expect(ctl.running.addresses).toHaveLength(1);
  await expect.poll(() => ctl.running.isLeader(), { timeout: 20_000 }).toBe(true);
  await ctl.stop();
});
