/**
 * A minimal RFC 6902 applier with the API server's all-or-nothing behaviour, so unit tests can
 * check what a patch does to a node (the sandbox tests check it against the real server). Like
 * the API server (evanphx/json-patch), a `test` of null passes when the target is missing.
 */
export class PatchTestFailed extends Error {}

type Op = { op: string; path: string; value?: unknown };

export function applyJsonPatch<T>(doc: T, ops: readonly Op[]): T {
  const out = structuredClone(doc) as unknown;
  for (const op of ops) {
    const segments = op.path.split('/').slice(1).map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = segments.pop() as string;
    const parent = segments.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], out);
    if (parent === undefined || parent === null) throw new PatchTestFailed(`path ${op.path} does not exist`);
    if (Array.isArray(parent)) applyToArray(parent, last, op);
    else applyToObject(parent as Record<string, unknown>, last, op);
  }
  return out as T;
}

function applyToArray(list: unknown[], key: string, op: Op): void {
  const index = key === '-' ? list.length : Number(key);
  switch (op.op) {
    case 'test':
      return check(op, list[index]);
    case 'add':
      list.splice(index, 0, op.value);
      return;
    case 'replace':
    case 'remove':
      if (index >= list.length) throw new PatchTestFailed(`${op.op} of missing ${op.path}`);
      if (op.op === 'replace') list[index] = op.value;
      else list.splice(index, 1);
      return;
    default:
      throw new Error(`unsupported op ${op.op}`);
  }
}

function applyToObject(obj: Record<string, unknown>, key: string, op: Op): void {
  switch (op.op) {
    case 'test':
      return check(op, obj[key]);
    case 'add':
      obj[key] = op.value;
      return;
    case 'replace':
    case 'remove':
      if (!(key in obj)) throw new PatchTestFailed(`${op.op} of missing ${op.path}`);
      if (op.op === 'replace') obj[key] = op.value;
      else delete obj[key];
      return;
    default:
      throw new Error(`unsupported op ${op.op}`);
  }
}

function check(op: Op, actual: unknown): void {
  if (actual === undefined && op.value === null) return;
  if (JSON.stringify(actual) !== JSON.stringify(op.value)) {
    throw new PatchTestFailed(`test failed at ${op.path}: ${JSON.stringify(actual)} != ${JSON.stringify(op.value)}`);
  }
}
