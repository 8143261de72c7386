import { z } from 'zod';

/**
 * Kubernetes name formats (k8s.io/apimachinery/pkg/util/validation) as zod fields, and the label
 * selector: shared by config/schema.ts and the sections it imports (gates), which cannot import it
 * back (a cycle evaluated before either module has finished).
 */

export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
export const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
export const QUANTITY = /^[+]?(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$/;

/** A label / annotation / taint key: `[prefix/]name`, prefix a DNS subdomain, name <= 63. */
export function isQualifiedName(key: string): boolean {
  const parts = key.split('/');
  if (parts.length > 2) return false;
  const name = parts.at(-1) as string;
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME_PART.test(name)) return false;
  if (parts.length === 2) {
    const prefix = parts[0] as string;
    if (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) return false;
  }
  return true;
}

export const qualifiedName = (description: string) =>
  z
    .string()
    .refine(isQualifiedName, { message: 'expected a qualified name such as "example.com/my-key" or "my-key"' })
    .meta({ description, 'x-allowed': 'a qualified name: optional DNS prefix and "/", then up to 63 of [A-Za-z0-9-_.]' });

export const labelValue = (description: string) =>
  z
    .string()
    .max(63)
    .regex(LABEL_VALUE, 'expected a label value: up to 63 of [A-Za-z0-9-_.], starting and ending alphanumeric')
    .meta({ description, 'x-allowed': 'a label value: up to 63 of [A-Za-z0-9-_.], or empty' });

export const dnsSubdomain = (description: string) =>
  z
    .string()
    .max(253)
    .regex(DNS1123_SUBDOMAIN, 'expected a lowercase DNS subdomain such as "kube-system"')
    .meta({ description, 'x-allowed': 'a lowercase DNS-1123 subdomain' });

export const dnsLabel = (description: string) =>
  z
    .string()
    .max(63)
    .regex(DNS1123_LABEL, 'expected a lowercase DNS label such as "kube-system"')
    .meta({ description, 'x-allowed': 'a lowercase DNS-1123 label (up to 63 of [a-z0-9-])' });

const LABEL_SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;

/**
 * A Kubernetes label selector (metav1.LabelSelector) on the labels of `what` ("the node", "the
 * DaemonSet"): every requirement must hold; empty selects everything.
 */
export function labelSelectorSchema(what: string) {
  return z
    .object({
      matchLabels: z
        .record(z.string().refine(isQualifiedName, { message: 'expected a label key such as "karpenter.sh/nodepool"' }), labelValue('The label value.'))
        .optional()
        .meta({ description: `Labels ${what} must carry with exactly these values.`, 'x-allowed': 'a map of label keys to label values' }),
      matchExpressions: z
        .array(
          z
            .object({
              key: qualifiedName('Label key.'),
              operator: z.enum(LABEL_SELECTOR_OPERATORS).meta({ description: 'In, NotIn, Exists or DoesNotExist.' }),
              values: z.array(labelValue('A label value.')).optional().meta({ description: 'For In and NotIn: at least one value; for Exists and DoesNotExist: none.' }),
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
        .meta({ description: `Set-based requirements (key, operator, values) on the labels of ${what}, as in a Deployment's selector.` }),
    })
    .strict();
}
export type LabelSelectorConfig = z.output<ReturnType<typeof labelSelectorSchema>>;
