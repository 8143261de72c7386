import { z } from 'zod';
import { duration, int } from '../../../config/fields.js';

/**
 * `nodeManagement.remediation`: the guards around deleting failed nodes
 * (`nodeManagement.deleteFailedNodes` switches remediation on; docs/remediation.md). Every field has
 * a safe default, unknown keys are errors, durations are Kubernetes strings ("10m") parsed to
 * milliseconds, with the field builders of config/fields.ts that config/schema.ts uses too (FieldMeta:
 * description, x-allowed, x-duration) so the generated docs and chart values pick it up as is.
 */

const percent = (defaultValue: number, description: string) =>
  z.number().min(0).max(100).default(defaultValue).meta({ description });

export const circuitBreakerSchema = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .meta({ description: 'Pause every deletion while too many verifications fail (a cluster-wide fault must not delete every new node). Turning it off leaves only the rate limits.' }),
    window: duration('15m', 'Sliding window of finished verifications (a node passing, or exhausting its retries) the failure share is computed over.', { min: 1000 }),
    minSamples: int(5, 'Finished verifications the window must hold before its failure share can open the breaker.', 1, 100_000),
    maxFailedPercent: percent(
      30,
      'The breaker opens while more than this share (percent) of the verifications finished in the window failed, and closes by itself once the share drops (failures age out, nodes pass). 100: never on this rule.',
    ),
    maxFailedPercentPerNodePool: percent(
      20,
      'The breaker also opens for a NodePool (label karpenter.sh/nodepool; nodes without it form one group) while more than this share of its nodes are failed or stuck, rounded up so a small pool may always lose one node. 100: never on this rule.',
    ),
  })
  .strict();

export const remediationSchema = z
  .object({
    dryRun: z
      .boolean()
      .default(false)
      .meta({ description: 'Decide and report everything (Events, metrics, logs) but delete nothing. The controller-wide dryRun implies it.' }),
    minNodeAge: duration('10m', 'A node younger than this (from its creationTimestamp) is not deleted yet, even if it failed.'),
    stuckNodeTimeout: duration(
      '1h',
      'A node that still carries a verification taint this long after it was created, was never verified and has no attempt in flight (the controller could never run a worker on it) is treated as failed. Counted from when this controller started leading if that is later, and without the time the node waited in line for a verification slot. Keep it above the longest a verification can take. 0 turns it off.',
      { min: 60_000, zeroAllowed: true },
    ),
    maxInFlight: int(2, 'Deletions in progress at once (issued, and the node not gone yet).', 1, 1000),
    maxPerHour: int(5, 'Deletions issued per rolling hour.', 1, 10_000),
    inFlightTimeout: duration(
      '15m',
      'A deletion whose node still exists this long after it was issued stops counting as in flight (a RemediationStalled Event says so); the node is not deleted twice.',
      { min: 1000 },
    ),
    circuitBreaker: circuitBreakerSchema
      .prefault({})
      .meta({ description: 'Pause deletions while too large a share of recent verifications, or of a NodePool\'s nodes, failed.' }),
  })
  .strict();

/** What users write under nodeManagement.remediation. */
export type RemediationConfigInput = z.input<typeof remediationSchema>;
/** Every field present, durations in milliseconds. */
export type RemediationConfig = z.output<typeof remediationSchema>;
export type CircuitBreakerConfig = RemediationConfig['circuitBreaker'];

/** Parses (and validates) a remediation section; throws a ZodError naming the field. */
export function parseRemediationConfig(input: unknown = {}): RemediationConfig {
  return remediationSchema.parse(input ?? {});
}
