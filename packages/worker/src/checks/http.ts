import { errorMessage } from '@kube-node-ready/core';
import { formatStatusRanges, type HttpTarget } from '../config.js';
import { deadline } from '../net/deadline.js';
import { httpProbe } from '../net/http-probe.js';
import { failedAgainst, Slowness, verdict, type Check } from './types.js';

/** Trusted for an https URL without `ca` or `caFile`. */
const BUILT_IN_CAS = "Node.js's built-in CA list (set ca or caFile for a private CA)";

/**
 * http: one GET per configured URL (http.targets), concurrently, from this pod: the answer's status
 * must be in the URL's expectStatus (default 200-399). What a node needs to reach that the other
 * checks do not cover: a registry's /v2/, an internal service. Without targets (the default) the
 * check contacts nothing and passes, saying so in its log line.
 */
export const httpCheck: Check = async ({ config, signal }) => {
  const targets = config.http.targets;
  if (targets.length === 0) return verdict([], { note: 'no http.targets configured: http not tested' });
  const results = await Promise.all(
    targets.map(async (target) => {
      const expected = formatStatusRanges(target.expectStatus);
      const own = target.timeout !== undefined ? deadline(target.timeout, 'http target timeout', signal) : undefined;
      try {
        const answer = await httpProbe(new URL(target.url), { ...(target.ca !== undefined ? { ca: target.ca } : {}), trusted: trusted(target) }, own?.signal ?? signal);
        const ok = inRange(answer.status, target);
        const redirect = answer.location !== undefined ? `, a redirect to ${clip(answer.location)} (not followed)` : '';
        return { url: target.url, ok, expected, ...answer, ...(ok ? {} : { problem: `${target.url} answered ${answer.status} (expected ${expected})${redirect}` }) };
      } catch (err) {
        const error = errorMessage(err);
        return { url: target.url, ok: false, expected, error, problem: `${target.url}: ${error}` };
      } finally {
        own?.dispose();
      }
    }),
  );
  // In the order of http.targets, whichever answered first.
  const problems: string[] = [];
  const slow = new Slowness(config, 'http');
  for (const { problem, ...result } of results) {
    if (problem !== undefined) problems.push(problem);
    else if ('responseMs' in result) slow.judge(result.url, result.responseMs, problems);
  }
  return failedAgainst(
    verdict(problems, { targets: results.map(({ problem: _problem, ...result }) => result) }, slow.warnings),
    results.filter((r) => !r.ok).map((r) => r.url),
  );
};

function inRange(status: number, target: HttpTarget): boolean {
  return target.expectStatus.some((r) => status >= r.from && status <= r.to);
}

function trusted(target: HttpTarget): string {
  if (target.caFrom === undefined) return BUILT_IN_CAS;
  return target.caFrom === 'ca' ? 'the certificates of its ca' : `the certificates in ${target.caFrom} (caFile)`;
}

/** A server-chosen text in a message: at most 200 characters. */
function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}
