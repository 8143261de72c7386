import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { run } from './proc.js';

/**
 * Headless Chromium (Debian's `chromium`) for pictures of the sandbox's web pages. It loads only the
 * URL it is given, which must be on 127.0.0.0/8 or a sandbox address (169.254.0.0/16): every other
 * host, address literals included, resolves to nothing (--host-resolver-rules), and nothing runs in
 * the background (no updates, no sync). Each run gets a fresh profile, removed afterwards.
 */
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

function checkUrl(url: string): void {
  const host = new URL(url).hostname;
  if (!/^127\.\d+\.\d+\.\d+$/.test(host) && !/^169\.254\.\d+\.\d+$/.test(host)) throw new Error(`chromium may only load pages of 127.0.0.0/8 or the sandbox (169.254.0.0/16), not ${url}`);
}

async function chromium(url: string, extra: string[]): Promise<{ stdout: string; stderr: string }> {
  checkUrl(url);
  const profile = mkdtempSync(join(tmpdir(), 'knr-chromium-'));
  try {
    const r = await run('chromium', [...FLAGS, `--user-data-dir=${profile}`, `--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE ${new URL(url).hostname}`, ...extra, url]);
    if (r.code !== 0) throw new Error(`chromium exited with ${r.code}: ${r.stderr.slice(-500)}`);
    return r;
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

/** The page's DOM after its scripts ran. */
export async function dumpDom(url: string): Promise<string> {
  return (await chromium(url, ['--dump-dom', '--virtual-time-budget=3000'])).stdout;
}

/** A PNG of the page; returns its size in bytes after checking it is a PNG. */
export async function screenshot(url: string, file: string, size = '1280,720'): Promise<number> {
  mkdirSync(dirname(file), { recursive: true });
  await chromium(url, [`--screenshot=${file}`, `--window-size=${size}`, '--hide-scrollbars', '--virtual-time-budget=3000']);
  const png = readFileSync(file);
  if (png.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a') throw new Error(`${file} is not a PNG`);
  return statSync(file).size;
}
