import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { ApiException, KubeConfig, PatchStrategy, type CoreV1Event } from '@kubernetes/client-node';
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { createLogger } from '@kube-node-ready/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildWorkerPod } from '../controllers/node/verification/pod-spec.js';
import { workerPodName } from '../controllers/node/verification/naming.js';
import { KubeEventRecorder } from '../events/recorder.js';
import { aNode, testConfig } from '../testing/builders.js';
import { FakeClock } from '../testing/fake-clock.js';
import { isAlreadyExists, isConflict, isNotFound, messageOf } from './errors.js';
import { PooledKubeConfig } from './config.js';
import { apiPath, LeanRequests } from './lean.js';

/** What client-node's generated code would send for `body` of that model type. */
const asClientNodeSends = (body: unknown, type: string): unknown => JSON.parse(JSON.stringify(ObjectSerializer.serialize(body, type, '')));
/** What the lean path sends. */
const asLeanSends = (body: unknown): unknown => JSON.parse(JSON.stringify(body));

describe('lean requests send the bodies client-node would send', () => {
  it('a worker pod', () => {
    const node = aNode('ip-10-0-1-23.ec2.internal').uid('5d2c1d8e-1111-2222-3333-444455556666').tainted().build();
    const pod = buildWorkerPod({ node, attempt: 2, podName: workerPodName('ip-10-0-1-23.ec2.internal', 'u', 2), config: testConfig(), image: 'img:1', configHash: 'abc', apiEndpoints: ['10.0.0.1:443'] });
    const sent = asLeanSends(pod);
    expect(sent).toEqual(asClientNodeSends(pod, 'V1Pod'));
    // A field client-node would rename or drop would show above; the pod has a spec worth comparing.
    expect(JSON.stringify(sent).length).toBeGreaterThan(1000);
  });

  it('an Event', async () => {
    const events: CoreV1Event[] = [];
    const log = await createLogger({ level: 'silent', destination: new Writable({ write: (_c, _e, done) => done() }) });
    const recorder = new KubeEventRecorder({
      sink: { create: async (_ns, event) => void events.push(event), bump: async () => undefined },
      clock: new FakeClock(),
      log,
      component: 'kube-node-ready',
      instance: 'controller-0',
    });
    await recorder.nodeEvent('node-a', 'Warning', 'VerificationFailed', 'dns: timeout');
    expect(events).toHaveLength(1);
    expect(asLeanSends(events[0])).toEqual(asClientNodeSends(events[0], 'CoreV1Event'));
  });
});

describe('LeanRequests on the wire', () => {
  const seen: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: string }> = [];
  let answer: { status: number; body: string } = { status: 200, body: '{}' };
  let server: Server;
  let lean: LeanRequests;

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(answer.body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}/prefix/`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 'secret-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    lean = new LeanRequests(PooledKubeConfig.of(kc));
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('sends the method, the escaped path under the server URL, the query, the token and the JSON body; parses the answer', async () => {
    answer = { status: 200, body: JSON.stringify({ metadata: { name: 'n:1', resourceVersion: '7' } }) };
    const ops = [{ op: 'test', path: '/metadata/uid', value: 'u' }];
    const node = await lean.json<{ metadata: { resourceVersion: string } }>({ method: 'PATCH', path: apiPath('api/v1/nodes', 'n:1'), query: { fieldManager: 'kube-node-ready', dryRun: undefined, n: 2 }, body: ops, contentType: PatchStrategy.JsonPatch });
    expect(node.metadata.resourceVersion).toBe('7');
    const req = seen.at(-1)!;
    expect(req.method).toBe('PATCH');
    expect(req.url).toBe('/prefix/api/v1/nodes/n%3A1?fieldManager=kube-node-ready&n=2');
    expect(req.headers.authorization).toBe('Bearer secret-token');
    expect(req.headers['content-type']).toBe('application/json-patch+json');
    expect(req.headers.accept).toBe('application/json');
    expect(JSON.parse(req.body)).toEqual(ops);
  });

  it('sends no body and no content type when there is none, and send() leaves the answer unparsed', async () => {
    answer = { status: 200, body: 'not json' };
    await expect(lean.send({ method: 'DELETE', path: apiPath('api/v1/namespaces', 'ns', 'pods', 'p') })).resolves.toBe('not json');
    const req = seen.at(-1)!;
    expect(req.body).toBe('');
    expect(req.headers['content-type']).toBeUndefined();
  });

  it('throws an answer outside 2xx as client-node does: ApiException with the status code and the body as text', async () => {
    const status = (code: number, reason: string, message: string) => ({ status: code, body: JSON.stringify({ kind: 'Status', status: 'Failure', reason, message, code }) });
    answer = status(409, 'Conflict', 'the object has been modified');
    const conflict = await lean.json({ method: 'PUT', path: '/apis/g/v1/things/a/status', body: {} }).catch((err: unknown) => err);
    expect(conflict).toBeInstanceOf(ApiException);
    expect((conflict as ApiException<string>).code).toBe(409);
    expect(isConflict(conflict)).toBe(true);
    expect(messageOf(conflict)).toBe('409 Conflict: the object has been modified');

    answer = status(409, 'AlreadyExists', 'pods "p" already exists');
    const exists = await lean.json({ method: 'POST', path: '/api/v1/namespaces/ns/pods', body: {} }).catch((err: unknown) => err);
    expect(isAlreadyExists(exists)).toBe(true);
    expect(isConflict(exists)).toBe(false);

    answer = status(404, 'NotFound', 'nodes "x" not found');
    expect(isNotFound(await lean.json({ method: 'GET', path: '/api/v1/nodes/x' }).catch((err: unknown) => err))).toBe(true);
  });
});
