import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { ContainerLogFile, followLog, readLog } from './container-log.js';
import { logOptions } from './server.js';

const dir = mkdtempSync(join(tmpdir(), 'knr-container-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A log written from two streams; resolves once it is closed. */
async function writeLog(chunks: Array<['stdout' | 'stderr', string]>): Promise<ContainerLogFile> {
  const log = new ContainerLogFile(join(dir, `${n++}.log`));
  const out = new PassThrough();
  const err = new PassThrough();
  log.attach('stdout', out);
  log.attach('stderr', err);
  for (const [stream, text] of chunks) (stream === 'stdout' ? out : err).write(text);
  out.end();
  err.end();
  await log.closed;
  return log;
}

describe('container logs in the CRI format', () => {
  it('writes one CRI line per output line, a partial last line tagged P, stdout and stderr apart', async () => {
    const log = await writeLog([
      ['stdout', 'one\ntw'],
      ['stderr', 'oops\n'],
      ['stdout', 'o\nthree'],
    ]);
    const lines = readFileSync(log.path, 'utf8').trimEnd().split('\n');
    expect(lines.map((l) => l.replace(/^\S+ /, ''))).toEqual(['stdout F one', 'stderr F oops', 'stdout F two', 'stdout P three']);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z /);
    expect((await readLog(log.path, {})).toString()).toBe('one\noops\ntwo\nthree');
  });

  it('tailLines, limitBytes, timestamps and sinceSeconds select and shape the output as a kubelet does', async () => {
    const log = await writeLog([['stdout', 'a\nb\nc\nd\n']]);
    expect((await readLog(log.path, { tailLines: 2 })).toString()).toBe('c\nd\n');
    expect((await readLog(log.path, { tailLines: 0 })).toString()).toBe('');
    expect((await readLog(log.path, { limitBytes: 3 })).toString()).toBe('a\nb');
    expect((await readLog(log.path, { timestamps: true, tailLines: 1 })).toString()).toMatch(/^\d{4}-\S+Z d\n$/);
    expect((await readLog(log.path, { sinceMs: Date.now() + 60_000 })).toString()).toBe('');
    expect((await readLog(log.path, { sinceMs: Date.now() - 60_000 })).toString()).toBe('a\nb\nc\nd\n');
    expect((await readLog(join(dir, 'missing.log'), {})).toString()).toBe('');
  });

  it('follow streams lines as they are written and ends when the run ends', async () => {
    const log = new ContainerLogFile(join(dir, `${n++}.log`));
    const out = new PassThrough();
    log.attach('stdout', out);
    log.attach('stderr', null);
    out.write('before\n');
    await new Promise((r) => setTimeout(r, 50));
    const got: string[] = [];
    const done = followLog(log, { tailLines: 1 }, (b) => (got.push(b.toString()), true), new AbortController().signal, 20);
    await new Promise((r) => setTimeout(r, 100));
    out.write('after\n');
    await new Promise((r) => setTimeout(r, 100));
    out.end('last\n');
    await done;
    expect(got.join('')).toBe('before\nafter\nlast\n');
  });

  it('reads the kubelet API query parameters', () => {
    const q = (s: string) => logOptions(new URLSearchParams(s), 1_000_000);
    expect(q('follow=true&previous=true&timestamps=true&tailLines=10&limitBytes=100&sinceSeconds=5')).toEqual({
      follow: true,
      previous: true,
      timestamps: true,
      tailLines: 10,
      limitBytes: 100,
      sinceMs: 995_000,
    });
    expect(q('sinceTime=1970-01-01T00:00:10Z').sinceMs).toBe(10_000);
    expect(() => q('tailLines=x')).toThrow(/invalid tailLines "x"/);
  });
});
