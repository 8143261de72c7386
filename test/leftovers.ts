import { readdirSync, readFileSync } from 'node:fs';

/** Processes whose command line names a path under `dir`, and mounts at or under it: what stopping what ran there left. */
export function processesAndMountsUnder(dir: string): string[] {
  const left: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    if (cmd.includes(`${dir}/`)) left.push(`process ${pid}: ${cmd.slice(0, 160)}`);
  }
  for (const line of readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
    const mount = line.split(' ')[1];
    if (mount === dir || mount?.startsWith(`${dir}/`)) left.push(`mount ${mount}`);
  }
  return left;
}
