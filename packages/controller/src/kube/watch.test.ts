import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LineSplitter, ResumingWatch } from './watch.js';

describe('LineSplitter', () => {
  it('cuts lines across chunk boundaries, a character split between chunks included, and skips blank lines', () => {
    const lines: string[] = [];
    const split = new LineSplitter((l) => lines.push(l));
    const text = Buffer.from('{"a":1}\n{"b":"é✓"}\n\n{"c":');
    // every split point: the 3-byte ✓ and the 2-byte é are cut too
    for (let cut = 0; cut <= text.length; cut++) {
      lines.length = 0;
      split.push(text.subarray(0, cut));
      split.push(text.subarray(cut));
      split.push(Buffer.from('3}\n'));
      expect(lines, `cut at ${cut}`).toEqual(['{"a":1}', '{"b":"é✓"}', '{"c":3}']);
    }
  });

  it('a last line without its newline comes out on flush', () => {
    const lines: string[] = [];
    const split = new LineSplitter((l) => lines.push(l));
    split.push(Buffer.from('{"a":1}\n{"b"'));
    split.push(Buffer.from(':2}'));
    expect(lines).toEqual(['{"a":1}']);
    split.flush();
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
  });
});

describe('ResumingWatch against a loopback server', () => {
  let server: Server;
  let respond: (res: ServerResponse) => void = () => undefined;
  const urls: string[] = [];
  let kc: KubeConfig;

  beforeAll(async () => {
    server = createServer((req, res) => {
      urls.push(req.url ?? '');
      respond(res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  function run(watchTimeoutSeconds = 5): Promise<{ events: Array<[string, unknown]>; err: unknown }> {
    const events: Array<[string, unknown]> = [];
    const watch = new ResumingWatch(kc, { transform: (obj) => ({ transformed: obj }), maxTimeoutSeconds: watchTimeoutSeconds });
    return new Promise((resolve) => {
      void watch.watch('/api/v1/nodes', { resourceVersion: '41', labelSelector: 'a=b' }, (type, obj) => events.push([type, obj]), (err) => resolve({ events, err }));
    });
  }

  it('asks for bookmarks and a timeout, reports each event (ERROR and BOOKMARK untransformed), skips a line that does not parse, and ends with null', async () => {
    respond = (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED","object":{"metadata":{"name":"n1"}}}\n{"type":"MOD');
      setTimeout(() => {
        res.write('IFIED","object":{"metadata":{"name":"n1"}}}\nnot json\n{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"42"}}}\n');
        res.end('{"type":"ERROR","object":{"code":410}}');
      }, 20);
    };
    const { events, err } = await run();
    expect(err).toBeNull();
    expect(events).toEqual([
      ['ADDED', { transformed: { metadata: { name: 'n1' } } }],
      ['MODIFIED', { transformed: { metadata: { name: 'n1' } } }],
      ['BOOKMARK', { metadata: { resourceVersion: '42' } }],
      ['ERROR', { code: 410 }],
    ]);
    const query = new URL(urls.at(-1)!, 'http://x').searchParams;
    expect(Object.fromEntries(query)).toMatchObject({ watch: 'true', resourceVersion: '41', labelSelector: 'a=b', allowWatchBookmarks: 'true' });
    expect(Number(query.get('timeoutSeconds'))).toBeGreaterThanOrEqual(4);
    expect(Number(query.get('timeoutSeconds'))).toBeLessThanOrEqual(5);
  });

  it('a refused watch ends with an Error carrying the status code (410 Gone makes ListWatch list again)', async () => {
    respond = (res) => {
      res.writeHead(410, { 'content-type': 'application/json' });
      res.end('{"kind":"Status","code":410,"reason":"Expired"}');
    };
    const { events, err } = await run();
    expect(events).toEqual([]);
    expect(err).toBeInstanceOf(Error);
    expect((err as { statusCode?: number }).statusCode).toBe(410);
    expect((err as Error).message).toBe('Gone');
  });
});
