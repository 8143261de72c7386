import type { V1Node } from '@kubernetes/client-node';
import { DEFAULT_PROFILE, type ControllerConfig, type LabelSelectorConfig, type ProfileConfig } from './schema.js';

/**
 * Per-pool profiles (config `profiles:`, docs/profiles.md): which settings apply to a node. The
 * first profile whose nodeSelector matches the node's labels applies; a node no profile selects
 * gets the top-level settings, profile "default". Each profile's settings are merged with the
 * top-level ones once, here, so everything downstream reads one ControllerConfig per node, as it
 * read the one configuration before: `profiles.of(node).config`.
 */
export interface Profile {
  name: string;
  /** The installation's configuration with this profile's settings applied. */
  config: ControllerConfig;
}

export class Profiles {
  private readonly selectors: Array<{ profile: Profile; matches: (labels: Readonly<Record<string, string>>) => boolean }>;
  readonly default: Profile;

  constructor(config: ControllerConfig) {
    this.default = { name: DEFAULT_PROFILE, config };
    this.selectors = config.profiles.map((p) => ({ profile: { name: p.name, config: applyProfile(config, p) }, matches: selectorMatcher(p.nodeSelector) }));
  }

  /** The profile that applies to `node`. Costs one label lookup per requirement of the profiles before the match. */
  of(node: V1Node): Profile {
    if (this.selectors.length === 0) return this.default;
    const labels = node.metadata?.labels ?? {};
    for (const { profile, matches } of this.selectors) if (matches(labels)) return profile;
    return this.default;
  }

  /** Every profile name, "default" last: the bounded values of the metrics' `profile` label. */
  names(): string[] {
    return [...this.selectors.map((s) => s.profile.name), DEFAULT_PROFILE];
  }

  /** Every profile, "default" last. */
  all(): Profile[] {
    return [...this.selectors.map((s) => s.profile), this.default];
  }
}

/**
 * The configuration a profile's nodes run with: the top-level one, with what the profile sets. It
 * keeps the `profiles` list, so whoever gets it can still tell a node's profile (the store, for its
 * NodeVerification; the DaemonSet agent's store).
 */
export function applyProfile(config: ControllerConfig, profile: ProfileConfig): ControllerConfig {
  const { name: _name, nodeSelector: _selector, ...settings } = profile;
  return merge(config, settings) as ControllerConfig;
}

/** Mappings merge key by key; lists and values replace; what the profile leaves out (undefined) is inherited. */
function merge(base: unknown, override: unknown): unknown {
  if (override === undefined) return base;
  if (!isPlainObject(override) || !isPlainObject(base)) return override;
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) out[key] = merge(base[key], value);
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A metav1.LabelSelector as a predicate on a node's labels (the API server's semantics: every requirement holds). */
export function selectorMatcher(selector: LabelSelectorConfig): (labels: Readonly<Record<string, string>>) => boolean {
  const requirements: Array<(labels: Readonly<Record<string, string>>) => boolean> = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) requirements.push((labels) => labels[key] === value);
  for (const { key, operator, values = [] } of selector.matchExpressions ?? []) {
    const set = new Set(values);
    switch (operator) {
      case 'In':
        requirements.push((labels) => labels[key] !== undefined && set.has(labels[key]));
        break;
      case 'NotIn':
        requirements.push((labels) => labels[key] === undefined || !set.has(labels[key]));
        break;
      case 'Exists':
        requirements.push((labels) => labels[key] !== undefined);
        break;
      case 'DoesNotExist':
        requirements.push((labels) => labels[key] === undefined);
        break;
    }
  }
  return (labels) => requirements.every((holds) => holds(labels));
}
