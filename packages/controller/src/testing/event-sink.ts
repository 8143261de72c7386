import type { CoreV1Event } from '@kubernetes/client-node';
import type { EventSink } from '../events/recorder.js';

/** An EventSink that records what the recorder sent, and fails the next call on demand (nextError). */
export class RecordingSink implements EventSink {
  calls: Array<{ op: 'create'; namespace: string; event: CoreV1Event } | { op: 'bump'; namespace: string; name: string; count: number; lastTimestamp: string }> = [];
  nextError: Error | undefined;

  async create(namespace: string, event: CoreV1Event): Promise<void> {
    this.fail();
    this.calls.push({ op: 'create', namespace, event });
  }

  async bump(namespace: string, name: string, count: number, lastTimestamp: string): Promise<void> {
    this.fail();
    this.calls.push({ op: 'bump', namespace, name, count, lastTimestamp });
  }

  reset(): void {
    this.calls = [];
    this.nextError = undefined;
  }

  private fail(): void {
    const err = this.nextError;
    this.nextError = undefined;
    if (err) throw err;
  }
}
