/**
 * Where a value contains itself, if anywhere (the path to the repeated object). YAML allows an
 * alias inside its own anchor (`a: &x {b: *x}`); the result is a cyclic object that a schema would
 * accept and that no one could walk or serialise. Both configuration loaders reject it with this path.
 */
export function cyclePath(value: unknown, path: PropertyKey[] = [], open = new Set<object>(), done = new Set<object>()): PropertyKey[] | undefined {
  if (typeof value !== 'object' || value === null || done.has(value)) return undefined;
  if (open.has(value)) return path;
  open.add(value);
  for (const [key, child] of Object.entries(value)) {
    path.push(Array.isArray(value) ? Number(key) : key);
    if (cyclePath(child, path, open, done)) return path;
    path.pop();
  }
  open.delete(value);
  done.add(value); // aliases share values: each is walked once
  return undefined;
}
