import { z } from 'zod';
import { parseQuantity } from './quantity.js';

/**
 * `gates`: readiness gates the controller checks itself, without a pod and without using an
 * attempt: DaemonSets that must have a Ready pod on the node, CSI drivers that must be registered in
 * its CSINode, extended resources it must advertise (evaluate.ts judges them, sources.ts watches what
 * they read). Every list empty (the default): no gate. The same section is a profile's; unknown keys
 * are errors.
 *
 * Its own small validators rather than config/schema.ts's: schema.ts imports this section, so an
 * import back would be a cycle evaluated before either module has finished (as container-checks.ts).
 */

// k8s.io/apimachinery/pkg/util/validation: a qualified name (optional DNS-subdomain prefix and "/").
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
// k8s.io/kubernetes/pkg/apis/storage/validation: a CSI driver name.
const CSI_DRIVER_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$/;

function qualifiedName(key: string): boolean {
  const parts = key.split('/');
  if (parts.length > 2) return false;
  const name = parts.at(-1) as string;
  if (name.length > 63 || !QUALIFIED_NAME_PART.test(name)) return false;
  const prefix = parts.length === 2 ? (parts[0] as string) : undefined;
  return prefix === undefined || (prefix.length > 0 && prefix.length <= 253 && DNS1123_SUBDOMAIN.test(prefix));
}

const labelKey = z.string().refine(qualifiedName, { message: 'expected a label key such as "app.kubernetes.io/name"' });
const labelValue = z.string().max(63).regex(LABEL_VALUE, 'expected a label value: up to 63 of [A-Za-z0-9-_.], starting and ending alphanumeric');

/** A metav1.LabelSelector (the shape of profiles' nodeSelector), here selecting DaemonSets by their labels. */
const daemonSetSelectorSchema = z
  .object({
    matchLabels: z.record(labelKey, labelValue).optional().meta({ description: 'Labels the DaemonSet must carry with exactly these values.', 'x-allowed': 'a map of label keys to label values' }),
    matchExpressions: z
      .array(
        z
          .object({
            key: labelKey.meta({ description: 'Label key.' }),
            operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']).meta({ description: 'In, NotIn, Exists or DoesNotExist.' }),
            values: z.array(labelValue).optional().meta({ description: 'For In and NotIn: at least one value; for Exists and DoesNotExist: none.' }),
          })
          .strict()
          .superRefine((req, ctx) => {
            const count = req.values?.length ?? 0;
            const setBased = req.operator === 'In' || req.operator === 'NotIn';
            if (setBased && count === 0) ctx.addIssue({ code: 'custom', path: ['values'], message: `operator ${req.operator} needs at least one value`, input: req.values });
            if (!setBased && count > 0) ctx.addIssue({ code: 'custom', path: ['values'], message: `operator ${req.operator} takes no values`, input: req.values });
          }),
      )
      .optional()
      .meta({ description: 'Set-based requirements (key, operator, values) on the DaemonSet\'s labels.' }),
  })
  .strict();

const daemonSetRefSchema = z
  .object({
    namespace: z
      .string()
      .max(63)
      .regex(DNS1123_LABEL, 'expected a namespace name such as "kube-system"')
      .meta({ description: 'The DaemonSet\'s namespace.', 'x-allowed': 'a lowercase DNS-1123 label' }),
    name: z
      .string()
      .max(253)
      .regex(DNS1123_SUBDOMAIN, 'expected a DaemonSet name such as "aws-node"')
      .optional()
      .meta({ description: 'One DaemonSet by name. While it does not exist, the node waits for it.' }),
    selector: daemonSetSelectorSchema.optional().meta({
      description: 'Every DaemonSet of the namespace whose labels match (matchLabels, matchExpressions); none matching: nothing to wait for.',
    }),
  })
  .strict()
  .superRefine((ref, ctx) => {
    if ((ref.name === undefined) === (ref.selector === undefined)) {
      ctx.addIssue({ code: 'custom', path: [], message: 'give either name or selector (one DaemonSet by name, or those whose labels match)', input: ref });
    }
  });

const quantity = z
  .union([z.string(), z.number()])
  .transform((value) => String(value))
  .refine((text) => parseQuantity(text) !== undefined && !text.trim().startsWith('-'), { message: 'expected a Kubernetes quantity such as "1", "500m" or "10Gi"' });

export const gatesSchema = z
  .object({
    mode: z
      .enum(['before', 'parallel'])
      .default('before')
      .meta({
        description:
          'before: the worker pod is launched once every gate holds (the node waits without using an attempt meanwhile). parallel: the worker runs while the gates are awaited; the node opens once both its worker passed and every gate holds.',
      }),
    requireDaemonSets: z
      .array(daemonSetRefSchema)
      .default([])
      .meta({
        description:
          'DaemonSets that must have a Ready pod on the node before it opens, each {namespace, name} or {namespace, selector}. Only those that would run on the node count, as the DaemonSet controller decides: the pod template\'s nodeSelector and required node affinity, and its tolerations (with the ones every DaemonSet pod gets) against the node\'s taints. One that does not tolerate the verification taint is not waited for: it can only run once the node is open (the controller logs it at debug level).',
      }),
    requireCSIDrivers: z
      .array(z.string().regex(CSI_DRIVER_NAME, 'expected a CSI driver name such as "ebs.csi.aws.com"').meta({ description: 'A CSI driver name.' }))
      .default([])
      .meta({ description: 'CSI drivers that must be registered on the node (its CSINode, storage.k8s.io/v1, lists them in spec.drivers) before it opens.', 'x-allowed': 'a list of CSI driver names' }),
    requireResources: z
      .record(z.string(), quantity)
      // Keys checked here: zod reports a refused record key only as "Invalid key in record".
      .superRefine((resources, ctx) => {
        for (const name of Object.keys(resources)) {
          if (!qualifiedName(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'expected a resource name such as "nvidia.com/gpu"', input: name });
        }
      })
      .default({})
      .meta({
        description: 'Resources the node must advertise in status.allocatable, at least the quantity given (e.g. nvidia.com/gpu: 1), before it opens: a device plugin that has registered.',
        'x-allowed': 'a map of resource names to quantities ("1", "500m", "10Gi")',
      }),
  })
  .strict();

/** What users write under gates. */
export type GatesConfigInput = z.input<typeof gatesSchema>;
/** Every field present; quantities as strings. */
export type GatesConfig = z.output<typeof gatesSchema>;
export type DaemonSetRef = GatesConfig['requireDaemonSets'][number];
export type DaemonSetSelector = NonNullable<DaemonSetRef['selector']>;

/** Parses (and validates) a gates section; throws a ZodError naming the field. */
export function parseGatesConfig(input: unknown = {}): GatesConfig {
  return gatesSchema.parse(input ?? {});
}

/** Whether the section asks for anything (no gate: nothing to watch, nothing to wait for). */
export function hasGates(gates: Pick<GatesConfig, 'requireDaemonSets' | 'requireCSIDrivers' | 'requireResources'>): boolean {
  return gates.requireDaemonSets.length > 0 || gates.requireCSIDrivers.length > 0 || Object.keys(gates.requireResources).length > 0;
}

/** The resources any of `configs` requires (what the node cache keeps of status.allocatable: slimNode). */
export function gatedResources(configs: Iterable<{ gates: Pick<GatesConfig, 'requireResources'> }>): ReadonlySet<string> {
  const resources = new Set<string>();
  for (const config of configs) for (const resource of Object.keys(config.gates.requireResources)) resources.add(resource);
  return resources;
}
