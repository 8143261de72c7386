// The PNG chart: per burst size (all repetitions pooled), the cumulative distribution of
// (taint removed - node created) and of (worker pod created - node created), drawn by gnuplot
// (Debian package gnuplot-nox, pngcairo terminal). Reads the results JSON, so a chart can be
// redrawn without re-running: node dist/bench.mjs chart bench/results/<date>.json
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ChartInput {
  title: string;
  bursts: Array<{ size: number; samples: Array<Array<number | null>> }>;
}

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd'];

export async function drawChart(input: ChartInput, png: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'knr-bench-chart-'));
  try {
    const sizes = [...new Set(input.bursts.map((b) => b.size))].sort((a, b) => a - b);
    const runs = (size: number) => input.bursts.filter((b) => b.size === size).length;
    const cdf = (size: number, pick: (s: Array<number | null>) => number | null, file: string) => {
      const values = input.bursts
        .filter((b) => b.size === size)
        .flatMap((b) => b.samples.map(pick))
        .filter((v): v is number => v !== null)
        .map((ms) => Math.max(ms, 1) / 1000)
        .sort((a, b) => a - b);
      writeFileSync(join(dir, file), values.map((v, i) => `${v} ${(i + 1) / values.length}`).join('\n') + '\n');
      return values.length;
    };
    const span = (s: Array<number | null>, from: number, to: number): number | null => {
      const a = s[from];
      const b = s[to];
      return a === null || a === undefined || b === null || b === undefined ? null : b - a;
    };
    const panels = [
      { title: 'node created -> taint removed (node open)', pick: (s: Array<number | null>) => span(s, 0, 3), key: 'open' },
      { title: 'node created -> worker pod created (controller reaction)', pick: (s: Array<number | null>) => span(s, 0, 1), key: 'react' },
    ];
    const maxSeconds = Math.max(0, ...input.bursts.flatMap((b) => b.samples.map((s) => (span(s, 0, 1) ?? 0) / 1000)));
    const lines = [
      'set terminal pngcairo size 1500,650 font "DejaVu Sans,11" noenhanced',
      `set output '${png}'`,
      `set multiplot layout 1,2 title "${input.title.replace(/"/g, "'")}" font "DejaVu Sans,13"`,
      'set logscale x 10',
      'set xrange [0.01:*]',
      'set yrange [0:1]',
      'set format x "%g"',
      'set grid xtics mxtics ytics',
      'set key bottom right box opaque',
      'set style textbox opaque noborder',
      'set xlabel "seconds after the node was created (log scale)"',
      'set ylabel "fraction of nodes (cumulative)"',
    ];
    for (const panel of panels) {
      lines.push(`set title "${panel.title}"`);
      const plots: string[] = [];
      sizes.forEach((size, i) => {
        const file = `${panel.key}-${size}.dat`;
        const n = cdf(size, panel.pick, file);
        if (n > 0) plots.push(`'${join(dir, file)}' using 1:2 with steps lw 2.5 lc rgb '${COLORS[i % COLORS.length]}' title '${size} nodes (${runs(size)} run${runs(size) > 1 ? 's' : ''}, ${n} samples)'`);
      });
      if (panel.key === 'react') {
        // The published reference: a condition-driven taint controller's delay before first acting on a node (p50).
        lines.push('set arrow 1 from 29,0 to 29,1 nohead dt 2 lw 1.5 lc rgb "#555555"');
        lines.push('set label 1 "reference p50, 50 nodes: ~29 s" at 29,0.97 right offset -0.5,0 front boxed font "DejaVu Sans,9"');
        lines.push('set arrow 2 from 105,0 to 105,1 nohead dt 2 lw 1.5 lc rgb "#555555"');
        lines.push('set label 2 "reference p50, 200 nodes: ~105 s" at 105,0.91 right offset -0.5,0 front boxed font "DejaVu Sans,9"');
        lines.push(`set xrange [0.01:${Math.max(200, maxSeconds * 1.5)}]`);
      }
      lines.push(plots.length ? `plot ${plots.join(', ')}` : 'plot NaN notitle');
      lines.push('unset arrow 1', 'unset arrow 2', 'unset label 1', 'unset label 2');
    }
    lines.push('unset multiplot');
    writeFileSync(join(dir, 'chart.gp'), lines.join('\n') + '\n');
    await new Promise<void>((resolve, reject) =>
      execFile('gnuplot', [join(dir, 'chart.gp')], (err, _out, stderr) => (err ? reject(new Error(`gnuplot: ${err.message}\n${stderr}`)) : resolve())),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The scale chart (scale.ts): the controller's steady memory (RSS, anonymous, charged to its cgroup)
 * and its CPU (start-up, and per verified node of the burst) against the Nodes in the cluster, each
 * with its fitted line, so the slope per node can be read off.
 */
export async function drawScaleChart(
  r: { points: Array<{ nodes: number; rssMiB: { mean: number }; anonMiB: { mean: number }; chargedMiB: { mean: number }; heapUsedMiB: number; startupCpuSeconds: number; burst: { size: number; cpuMsPerNode: number } }>; limit: { MiB: number } },
  title: string,
  png: string,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'knr-bench-chart-'));
  try {
    writeFileSync(
      join(dir, 'scale.dat'),
      r.points.map((p) => `${p.nodes} ${p.rssMiB.mean} ${p.anonMiB.mean} ${p.chargedMiB.mean} ${p.startupCpuSeconds} ${p.burst.cpuMsPerNode} ${p.heapUsedMiB}`).join('\n') + '\n',
    );
    const data = `'${join(dir, 'scale.dat')}'`;
    const maxNodes = Math.max(...r.points.map((p) => p.nodes));
    const burst = r.points[0]?.burst.size ?? 0;
    const lines = [
      'set terminal pngcairo size 1500,650 font "DejaVu Sans,11" noenhanced',
      `set output '${png}'`,
      `set multiplot layout 1,2 title "${title.replace(/"/g, "'")}" font "DejaVu Sans,13"`,
      `set xrange [0:${Math.ceil((maxNodes * 1.1) / 1000) * 1000}]`,
      'set grid',
      'set key top left box opaque',
      'set xlabel "realistic Nodes in the cluster (each with its NodeVerification)"',
      'set title "controller memory, steady (mean of the window)"',
      'set ylabel "MiB"',
      `set yrange [0:${Math.ceil((r.limit.MiB * 1.1) / 50) * 50}]`,
      'f(x) = a1 + b1*x; g(x) = a2 + b2*x; h(x) = a3 + b3*x; u(x) = a6 + b6*x',
      `fit f(x) ${data} using 1:2 via a1, b1`,
      `fit g(x) ${data} using 1:3 via a2, b2`,
      `fit h(x) ${data} using 1:4 via a3, b3`,
      `fit u(x) ${data} using 1:7 via a6, b6`,
      `set arrow 1 from graph 0, first ${r.limit.MiB} to graph 1, first ${r.limit.MiB} nohead dt 2 lw 1.5 lc rgb "#d62728"`,
      `set label 1 "memory limit (${r.limit.MiB} MiB)" at graph 0.98, first ${r.limit.MiB} right offset 0,0.7 tc rgb "#d62728"`,
      `plot ${data} using 1:2 with points pt 7 ps 1.5 lc rgb '#1f77b4' title sprintf('RSS (%.1f KiB per node)', b1*1024), f(x) with lines lw 2 lc rgb '#1f77b4' notitle, ` +
        `${data} using 1:3 with points pt 5 ps 1.5 lc rgb '#2ca02c' title sprintf('anonymous (%.1f KiB per node)', b2*1024), g(x) with lines lw 2 lc rgb '#2ca02c' notitle, ` +
        `${data} using 1:4 with points pt 9 ps 1.5 lc rgb '#ff7f0e' title sprintf('charged to its cgroup (%.1f KiB per node)', b3*1024), h(x) with lines lw 2 lc rgb '#ff7f0e' notitle, ` +
        `${data} using 1:7 with points pt 11 ps 1.5 lc rgb '#7f7f7f' title sprintf('V8 heap in use (%.1f KiB per node)', b6*1024), u(x) with lines lw 2 dt 2 lc rgb '#7f7f7f' notitle`,
      'unset arrow 1',
      'unset label 1',
      'set title "controller CPU"',
      'set key bottom right box opaque',
      'set ylabel "CPU seconds, start-up"',
      'set y2label "CPU ms per verified node"',
      'set yrange [0:*]',
      'set y2range [0:*]',
      'set ytics nomirror',
      'set y2tics',
      'p(x) = a4 + b4*x; q(x) = a5 + b5*x',
      `fit p(x) ${data} using 1:5 via a4, b4`,
      `fit q(x) ${data} using 1:6 via a5, b5`,
      `plot ${data} using 1:5 with points pt 7 ps 1.5 lc rgb '#9467bd' title sprintf('start-up to synced and leading, CPU s (%.2f ms per node)', b4*1000), p(x) with lines lw 2 lc rgb '#9467bd' notitle, ` +
        `${data} using 1:6 with points pt 5 ps 1.5 lc rgb '#8c564b' axes x1y2 title 'CPU ms per verified node over a burst of ${burst} (instant worker; right axis)', q(x) axes x1y2 with lines lw 2 lc rgb '#8c564b' notitle`,
      'unset multiplot',
    ];
    writeFileSync(join(dir, 'chart.gp'), lines.join('\n') + '\n');
    await new Promise<void>((resolve, reject) =>
      execFile('gnuplot', [join(dir, 'chart.gp')], { cwd: dir }, (err, _out, stderr) => (err ? reject(new Error(`gnuplot: ${err.message}\n${stderr}`)) : resolve())),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
