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
