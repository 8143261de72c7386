import type { V1Pod } from '@kubernetes/client-node';
import { formatDuration, parseDuration } from '@kube-node-ready/core';
import { z } from 'zod';
import { PodAnnotation, WorkerContainer } from '../../../api/well-known.js';
import { duration } from '../../../config/fields.js';

/**
 * Container checks (config `worker.containerChecks`): the user's own checks, each a container of
 * the node's worker pod beside the worker container, reported as a check of its own (its exit
 * code, its termination message, its duration). pod-spec.ts adds the containers, pod-result.ts
 * reads them.
 */

// Kubernetes formats (k8s.io/apimachinery/pkg/util/validation); kept here so config/schema.ts can import this file.
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const QUANTITY = /^[+]?(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$/;
/** `cpu`, `memory`, `ephemeral-storage`, or an extended resource such as `nvidia.com/gpu`. */
const RESOURCE_NAME = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

/**
 * The worker's own checks: a container check may not take one of their names (the results share
 * one list, the metrics one `check` label), nor the worker container's.
 */
export const BUILT_IN_CHECKS = ['dns', 'api', 'tcp', 'service', 'podnet', 'mtu', 'egress', 'http'] as const;
const RESERVED_NAMES: ReadonlySet<string> = new Set([...BUILT_IN_CHECKS, WorkerContainer.Name]);

const resourceList = (description: string, defaults: Record<string, string>) =>
  z
    .record(
      z.string().max(253).regex(RESOURCE_NAME, 'expected a resource name such as "cpu", "memory" or "nvidia.com/gpu"'),
      z.string().regex(QUANTITY, 'expected a Kubernetes quantity such as "50m", "64Mi" or "1"'),
    )
    .default(defaults)
    .meta({ description, 'x-allowed': 'a map of resource names (cpu, memory, ephemeral-storage, extended resources such as nvidia.com/gpu) to quantities' });

export const containerCheckSchema = z
  .object({
    name: z
      .string()
      .max(63)
      .regex(DNS1123_LABEL, 'expected a lowercase DNS label such as "gpu"')
      .refine((name) => !RESERVED_NAMES.has(name), { message: `names a built-in check or the worker container (${[...RESERVED_NAMES].join(', ')}); choose another name` })
      .meta({
        description: 'The check\'s name: its container\'s name in the worker pod (`kubectl logs POD -c NAME`), and the check\'s name in the results, Events and the `check` label of the metrics. Not a built-in check\'s (dns, api, tcp, service, podnet, mtu, egress, http) nor "worker".',
        'x-allowed': 'a lowercase DNS-1123 label (up to 63 of [a-z0-9-])',
      }),
    image: z
      .string()
      .min(1)
      .regex(/^\S+$/, 'expected an image reference without spaces')
      .meta({ description: 'The container image (pulled with the worker pod\'s imagePullSecrets). With the chart, the admission policy admits exactly the images listed here.' }),
    command: z.array(z.string()).default([]).meta({ description: 'The container\'s command (its entrypoint). Empty: the image\'s own.' }),
    args: z.array(z.string()).default([]).meta({ description: 'Arguments to the command. Empty: the image\'s own.' }),
    env: z
      .array(
        z
          .object({
            name: z.string().regex(ENV_NAME, 'expected an environment variable name such as "TARGET_URL"').meta({ description: 'Variable name.' }),
            value: z.string().default('').meta({ description: 'Its value.' }),
          })
          .strict(),
      )
      .default([])
      .meta({ description: 'Environment variables, after NODE_NAME, POD_NAME, POD_NAMESPACE, POD_IP and HOST_IP, which every check gets (a variable of the same name replaces one of those).' }),
    resources: z
      .object({
        requests: resourceList('Resource requests of the check\'s container.', { cpu: '10m', memory: '16Mi' }),
        limits: resourceList('Resource limits of the check\'s container (an extended resource such as nvidia.com/gpu is requested by its limit).', { memory: '128Mi' }),
      })
      .strict()
      .prefault({})
      .meta({ description: 'Resources of the check\'s container.' }),
    timeout: duration('60s', 'A check still running this long after its container started fails as timed out; the attempt ends then, and the controller deletes the pod.', { min: 1000 }),
  })
  .strict();

/** The list: names unique. */
export const containerChecksSchema = z
  .array(containerCheckSchema)
  .superRefine((checks, ctx) => {
    const seen = new Set<string>();
    for (const [i, check] of checks.entries()) {
      if (seen.has(check.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `container check "${check.name}" is defined twice; names must be unique`, input: check.name });
      seen.add(check.name);
    }
  })
  .default([])
  .meta({
    description:
      'Checks of your own, each a container run in the node\'s worker pod beside the worker (one pod per attempt still), as non-root with a read-only root filesystem, no privilege escalation and no capabilities, with a writable /tmp on the node\'s disk shared by the checks. A check passes when its container exits 0; any other exit fails it with its termination message (or the end of its logs). A check whose container cannot start (image pull error, bad configuration) fails at once with the kubelet\'s reason. The attempt ends when the worker and every check have finished (docs/checks.md).',
  });

export type ContainerCheck = z.output<typeof containerCheckSchema>;
export type ContainerCheckInput = z.input<typeof containerCheckSchema>;

/** The annotation value that carries each check's timeout on its pod: `{"gpu":"30s"}`. */
export function checkTimeoutsAnnotation(checks: readonly ContainerCheck[]): string {
  return JSON.stringify(Object.fromEntries(checks.map((c) => [c.name, formatDuration(c.timeout)])));
}

/**
 * The container checks of a worker pod: every container but the worker, each with its timeout
 * (ms) from the pod's annotation, else `fallbackMs`. A pod is the record of its attempt: a
 * configuration changed since its launch does not change how it is judged.
 */
export function containerChecksOf(pod: V1Pod, fallbackMs: number): Array<{ name: string; timeoutMs: number }> {
  const containers = (pod.spec?.containers ?? []).filter((c) => c.name !== WorkerContainer.Name);
  if (containers.length === 0) return [];
  const timeouts = readTimeouts(pod.metadata?.annotations?.[PodAnnotation.CheckTimeouts]);
  return containers.map((c) => ({ name: c.name, timeoutMs: timeouts.get(c.name) ?? fallbackMs }));
}

function readTimeouts(text: string | undefined): Map<string, number> {
  const timeouts = new Map<string, number>();
  if (!text) return timeouts;
  try {
    const doc: unknown = JSON.parse(text);
    if (typeof doc !== 'object' || doc === null) return timeouts;
    for (const [name, value] of Object.entries(doc)) {
      if (typeof value !== 'string') continue;
      try {
        timeouts.set(name, parseDuration(value));
      } catch {
        /* not a duration: the fallback applies */
      }
    }
  } catch {
    /* not JSON: the fallback applies */
  }
  return timeouts;
}
