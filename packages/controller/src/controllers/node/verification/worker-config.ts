import { WorkerContainer } from '../../../api/well-known.js';
import { DEFAULT_PROFILE } from '../../../config/schema.js';
import type { Profiles } from '../../../config/profiles.js';
import { configHash, workerConfigDocument } from './pod-spec.js';

/** One profile's worker configuration in the worker ConfigMap. */
export interface WorkerConfigEntry {
  /** Its key in the ConfigMap: `worker.yaml` for the top-level settings, `worker.PROFILE.yaml` for a profile's. */
  key: string;
  /** Its worker.checks, as YAML. */
  document: string;
  /** configHash() of the document (the worker pod's annotation). */
  hash: string;
}

/**
 * The worker ConfigMap (worker.configMapName): each profile's worker.checks under a key of its own,
 * so every worker pod mounts the checks of its node's profile, and a profile's change never touches
 * another's pods.
 */
export class WorkerConfigMap {
  private readonly entries = new Map<string, WorkerConfigEntry>();

  constructor(profiles: Pick<Profiles, 'all'>) {
    for (const profile of profiles.all()) {
      const document = workerConfigDocument(profile.config.worker);
      this.entries.set(profile.name, { key: workerConfigKey(profile.name), document, hash: configHash(document) });
    }
  }

  /** The entry of a profile (the top-level one for a name it does not know). */
  of(profile: string): WorkerConfigEntry {
    return this.entries.get(profile) ?? (this.entries.get(DEFAULT_PROFILE) as WorkerConfigEntry);
  }

  /** The ConfigMap's data. */
  data(): Record<string, string> {
    return Object.fromEntries([...this.entries.values()].map((e) => [e.key, e.document]));
  }
}

export function workerConfigKey(profile: string): string {
  return profile === DEFAULT_PROFILE ? WorkerContainer.ConfigFile : `worker.${profile}.yaml`;
}
