import { z } from 'zod';
import { dnsLabel, dnsSubdomain, isQualifiedName, labelSelectorSchema } from '../../../../config/kube-names.js';
import { parseQuantity } from './quantity.js';

/**
 * `gates`: readiness gates the controller checks itself, without a pod and without using an
 * attempt: DaemonSets that must have a Ready pod on the node, CSI drivers that must be registered in
 * its CSINode, extended resources it must advertise (evaluate.ts judges them, sources.ts watches what
 * they read). Every list empty (the default): no gate. The same section is a profile's; unknown keys
 * are errors.
 *
 * Its name formats come from config/kube-names.ts: schema.ts imports this section, so an import
 * back would be a cycle evaluated before either module has finished.
 */

// k8s.io/kubernetes/pkg/apis/storage/validation: a CSI driver name.
const CSI_DRIVER_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$/;

const daemonSetRefSchema = z
  .object({
    namespace: dnsLabel('The DaemonSet\'s namespace.'),
    name: dnsSubdomain('One DaemonSet by name. While it does not exist, the node waits for it.').optional(),
    selector: labelSelectorSchema('the DaemonSet').optional().meta({
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
          if (!isQualifiedName(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'expected a resource name such as "nvidia.com/gpu"', input: name });
        }
      })
      .default({})
      .meta({
        description: 'Resources the node must advertise in status.allocatable, at least the quantity given (e.g. nvidia.com/gpu: 1), before it opens: a device plugin that has registered. Every node the section applies to must have it: set it in the profile of the pool that has the device.',
        'x-allowed': 'a map of resource names to quantities ("1", "500m", "10Gi")',
      }),
  })
  .strict();

/** What users write under gates. */
export type GatesConfigInput = z.input<typeof gatesSchema>;
/** Every field present; quantities as strings. */
export type GatesConfig = z.output<typeof gatesSchema>;
export type DaemonSetRef = GatesConfig['requireDaemonSets'][number];

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
