import type { V1Node } from '@kubernetes/client-node';
import { Annotation } from '../../../api/well-known.js';
import { OUTCOMES, Phase, type Failing, type Outcome, type VerificationState } from './types.js';

/**
 * Verification progress lives in annotations on the Node (ADR 0002), so a restarted controller or
 * a new leader resumes where the last one stopped. State written for another node UID (a node
 * re-created with the same name, or restored from a backup) is ignored.
 */
export type StateRead =
  | { kind: 'none' }
  | { kind: 'ok'; state: VerificationState }
  /** Annotations present but unusable: treated as no state, reported once in the log. */
  | { kind: 'invalid'; problem: string };

const PHASES = new Set<string>(Object.values(Phase));

export function readState(node: V1Node): StateRead {
  const a = node.metadata?.annotations ?? {};
  const uid = a[Annotation.NodeUid];
  if (uid === undefined && a[Annotation.Attempt] === undefined && a[Annotation.Phase] === undefined) return { kind: 'none' };
  if (uid === undefined || uid !== node.metadata?.uid) {
    return { kind: 'invalid', problem: `state belongs to node UID ${uid ?? '(none)'}, not ${node.metadata?.uid ?? '(none)'}` };
  }
  const attempt = parseCount(a[Annotation.Attempt]);
  const failures = parseCount(a[Annotation.Failures] ?? '0');
  const phase = a[Annotation.Phase];
  if (attempt === undefined || attempt < 1) return { kind: 'invalid', problem: `bad ${Annotation.Attempt} ${JSON.stringify(a[Annotation.Attempt])}` };
  if (failures === undefined) return { kind: 'invalid', problem: `bad ${Annotation.Failures} ${JSON.stringify(a[Annotation.Failures])}` };
  if (phase === undefined || !PHASES.has(phase)) return { kind: 'invalid', problem: `bad ${Annotation.Phase} ${JSON.stringify(phase)}` };
  const state: VerificationState = { uid, attempt, failures, phase: phase as Phase };
  const next = parseTime(a[Annotation.NextAttemptAt]);
  if (next !== undefined) state.nextAttemptAt = next;
  const outcome = a[Annotation.LastOutcome];
  if (outcome !== undefined && (OUTCOMES as readonly string[]).includes(outcome)) state.lastOutcome = outcome as Outcome;
  const message = a[Annotation.LastMessage];
  if (message !== undefined) state.lastMessage = message;
  const verifiedAt = parseTime(a[Annotation.VerifiedAt]);
  if (verifiedAt !== undefined) state.verifiedAt = verifiedAt;
  // Only memory for the cluster-wide rule: a value that cannot be read is left out, not an error.
  const failing = parseFailing(a[Annotation.Failing]);
  if (failing !== undefined) state.failing = failing;
  if (state.phase === Phase.Backoff && state.nextAttemptAt === undefined) {
    return { kind: 'invalid', problem: `phase Backoff without ${Annotation.NextAttemptAt}` };
  }
  return { kind: 'ok', state };
}

/**
 * The annotation values that represent `state` (null: remove the annotation). Every state key is
 * always present in the result, so a write replaces the whole state and never leaves a stale field.
 */
export function stateAnnotations(state: VerificationState): Record<string, string | null> {
  return {
    [Annotation.NodeUid]: state.uid,
    [Annotation.Attempt]: String(state.attempt),
    [Annotation.Failures]: String(state.failures),
    [Annotation.Phase]: state.phase,
    [Annotation.NextAttemptAt]: state.nextAttemptAt === undefined ? null : formatTime(state.nextAttemptAt),
    [Annotation.LastOutcome]: state.lastOutcome ?? null,
    [Annotation.LastMessage]: state.lastMessage ?? null,
    [Annotation.VerifiedAt]: state.verifiedAt === undefined ? null : formatTime(state.verifiedAt),
    [Annotation.Failing]: state.failing === undefined ? null : formatFailing(state.failing),
  };
}

/** At most this many checks, each target at most this long, are kept in the failing annotation. */
const FAILING_MAX_CHECKS = 16;
const FAILING_MAX_TARGET = 256;

/** The failing annotation's value: `{"since":"<RFC 3339>","at":"<RFC 3339>","checks":{"dns":"10.96.0.10:53"}}`. */
export function formatFailing(f: Failing): string {
  const checks = Object.fromEntries(
    Object.entries(f.checks)
      .filter(([, target]) => target.length <= FAILING_MAX_TARGET)
      .slice(0, FAILING_MAX_CHECKS),
  );
  return JSON.stringify({ since: formatTime(f.since), at: formatTime(f.at), checks });
}

function parseFailing(text: string | undefined): Failing | undefined {
  if (text === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const { since, at, checks } = v as Record<string, unknown>;
  const sinceMs = typeof since === 'string' ? parseTime(since) : undefined;
  const atMs = typeof at === 'string' ? parseTime(at) : undefined;
  if (sinceMs === undefined || atMs === undefined || typeof checks !== 'object' || checks === null || Array.isArray(checks)) return undefined;
  const entries = Object.entries(checks as Record<string, unknown>);
  if (entries.length > FAILING_MAX_CHECKS || entries.some(([, t]) => typeof t !== 'string' || t === '' || t.length > FAILING_MAX_TARGET)) return undefined;
  return { since: sinceMs, at: atMs, checks: Object.fromEntries(entries) as Record<string, string> };
}

/** Every annotation key the state uses (for `kube-node-ready verify NODE`, which removes them). */
export const STATE_ANNOTATION_KEYS: readonly string[] = Object.values(Annotation);

export function formatTime(ms: number): string {
  // RFC 3339 with second precision, like Kubernetes timestamps; rounded up so "not before" holds.
  return new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function parseTime(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

function parseCount(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,9}$/.test(text)) return undefined;
  return Number(text);
}
