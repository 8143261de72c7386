// A Dockerfile read as the tests need it: its instructions, its stages, ARG expansion and the
// key=value lists of ENV and LABEL. Enough of the Dockerfile syntax for this repository's Dockerfile
// and the mutations the tests make of it, not a full parser (no heredocs, no escape directive).

export interface Instruction {
  line: number;
  keyword: string;
  rest: string;
}

/** The Dockerfile's instructions: continuation lines joined, comments (and parser directives) dropped. */
export function instructions(dockerfile: string): Instruction[] {
  const out: Instruction[] = [];
  let text = '';
  let start = 0;
  dockerfile.split(/\r?\n/).forEach((raw, i) => {
    if (/^\s*#/.test(raw)) return; // a comment, also inside a continuation
    if (text === '') start = i + 1;
    const continued = /\\\s*$/.test(raw);
    text += `${continued ? raw.replace(/\\\s*$/, '') : raw} `;
    if (continued) return;
    const m = /^\s*(\S+)\s*(.*?)\s*$/.exec(text);
    if (m) out.push({ line: start, keyword: m[1]!.toUpperCase(), rest: m[2]! });
    text = '';
  });
  return out;
}

/** `$NAME` and `${NAME}` from args; any other form stays as it is. */
export const expand = (value: string, args: Map<string, string | undefined>) =>
  value.replace(/\$(?:\{(\w+)\}|(\w+))/g, (whole, a?: string, b?: string) => args.get((a ?? b)!) ?? whole);

const unquote = (s: string) => s.replace(/^(["'])(.*)\1$/, '$2');

/**
 * `KEY=value KEY2="a value"` as ENV and LABEL write them, quotes removed, `$` references kept as
 * written. ENV's legacy form `KEY value` (one pair, the value is the rest of the line) too.
 */
export function keyValues(rest: string): Map<string, string> {
  const out = new Map<string, string>();
  const legacy = /^([^\s=]+)\s+(.*)$/.exec(rest);
  if (legacy) {
    out.set(legacy[1]!, legacy[2]!);
    return out;
  }
  for (const m of rest.matchAll(/("[^"]*"|[^\s=]+)=("(?:[^"\\]|\\.)*"|'[^']*'|\S*)/g)) out.set(unquote(m[1]!), unquote(m[2]!));
  return out;
}

export interface Stage {
  /** The FROM's image (or stage) reference as written, and with ARG defaults substituted. */
  from: string;
  image: string;
  name?: string;
  /** The stage's instructions after its FROM. */
  body: Instruction[];
}

/**
 * The build stages in order. The ARGs before the first FROM (the global ones) expand the FROM
 * references; inside a stage they are visible only where the stage declares them again.
 */
export function stages(dockerfile: string): Stage[] {
  const globalArgs = new Map<string, string | undefined>();
  const out: Stage[] = [];
  for (const ins of instructions(dockerfile)) {
    if (ins.keyword === 'FROM') {
      const words = ins.rest.split(/\s+/).filter((w) => !w.startsWith('--'));
      const from = words[0] ?? '';
      const name = words[1]?.toUpperCase() === 'AS' ? words[2]?.toLowerCase() : undefined;
      out.push({ from, image: expand(from, globalArgs), ...(name ? { name } : {}), body: [] });
    } else if (out.length > 0) {
      out.at(-1)!.body.push(ins);
    } else if (ins.keyword === 'ARG') {
      for (const m of ins.rest.matchAll(/(\w+)(?:=("[^"]*"|'[^']*'|\S*))?/g)) globalArgs.set(m[1]!, m[2] === undefined ? undefined : unquote(m[2]));
    }
  }
  return out;
}
