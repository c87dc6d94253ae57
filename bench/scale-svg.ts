// docs/scale.svg, written by `npm run bench -- scale` (bench/scale.ts): two plain panels, each figure
// against N agents (log scale), one line per store and a dashed one for its floor. No dependencies.
export interface Series {
  name: string;
  color: string;
  floor: boolean;
  points: Array<{ n: number; y: number | null }>;
}

export interface Panel {
  title: string;
  unit: string;
  series: Series[];
}

const W = 440;
const H = 300;
const M = { left: 58, right: 16, top: 34, bottom: 44 };
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A round step giving about five ticks up to `max`. */
function step(max: number) {
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw || 1));
  return [1, 2, 2.5, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? raw;
}

function panel(p: Panel, ns: number[], dx: number): string {
  const ys = p.series.flatMap((s) => s.points.map((q) => q.y)).filter((y): y is number => y !== null);
  const top = Math.max(...ys, 0) * 1.1 || 1;
  const st = step(top);
  const ymax = Math.ceil(top / st) * st;
  const [lo, hi] = [Math.log2(Math.min(...ns)), Math.log2(Math.max(...ns))];
  const x = (n: number) =>
    Math.round((dx + M.left + ((Math.log2(n) - lo) / (hi - lo || 1)) * (W - M.left - M.right)) * 10) / 10;
  const y = (v: number) => Math.round((M.top + (1 - v / ymax) * (H - M.top - M.bottom)) * 10) / 10;
  const out: string[] = [];
  out.push(`<text x="${dx + W / 2}" y="18" text-anchor="middle" font-weight="bold">${esc(p.title)}</text>`);
  for (let v = 0; v <= ymax + st / 2; v += st) {
    const label = Number.isInteger(v) ? String(v) : v.toFixed(2).replace(/0+$/, '');
    out.push(
      `<line x1="${dx + M.left}" x2="${dx + W - M.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${dx + M.left - 6}" y="${y(v) + 4}" text-anchor="end">${label}</text>`,
    );
  }
  for (const n of ns)
    out.push(
      `<line x1="${x(n)}" x2="${x(n)}" y1="${H - M.bottom}" y2="${H - M.bottom + 4}" stroke="#333"/>`,
      `<text x="${x(n)}" y="${H - M.bottom + 17}" text-anchor="middle">${n}</text>`,
    );
  out.push(
    `<line x1="${dx + M.left}" x2="${dx + W - M.right}" y1="${H - M.bottom}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<line x1="${dx + M.left}" x2="${dx + M.left}" y1="${M.top}" y2="${H - M.bottom}" stroke="#333"/>`,
    `<text x="${dx + (W + M.left - M.right) / 2}" y="${H - 8}" text-anchor="middle">agents (N)</text>`,
    `<text transform="translate(${dx + 14} ${(H + M.top - M.bottom) / 2}) rotate(-90)" text-anchor="middle">${esc(p.unit)}</text>`,
  );
  for (const s of p.series) {
    const pts = s.points.filter((q): q is { n: number; y: number } => q.y !== null);
    if (!pts.length) continue;
    const dash = s.floor ? ' stroke-dasharray="5 4"' : '';
    out.push(
      `<polyline fill="none" stroke="${s.color}" stroke-width="2"${dash} points="${pts.map((q) => `${x(q.n)},${y(q.y)}`).join(' ')}"/>`,
      ...pts.map((q) => `<circle cx="${x(q.n)}" cy="${y(q.y)}" r="3" fill="${s.color}"/>`),
    );
  }
  return out.join('\n');
}

/** The SVG of the panels side by side, one legend under them. */
export function scaleSvg(panels: Panel[], ns: number[], caption: string): string {
  const series = panels[0]?.series ?? [];
  const legendRows = Math.ceil(series.length / 3);
  const width = W * panels.length;
  const height = H + 20 + legendRows * 18 + 22;
  const legend = series.map((s, k) => {
    const lx = 20 + (k % 3) * (width / 3);
    const ly = H + 18 + Math.floor(k / 3) * 18;
    const dash = s.floor ? ' stroke-dasharray="5 4"' : '';
    return `<line x1="${lx}" x2="${lx + 26}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/><text x="${lx + 32}" y="${ly + 4}">${esc(s.name)}</text>`;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">
<title>CPU of all processes per message, and send p99, against the number of agents (npm run bench -- scale)</title>
<rect width="100%" height="100%" fill="#fff"/>
${panels.map((p, k) => panel(p, ns, k * W)).join('\n')}
${legend.join('\n')}
<text x="${width / 2}" y="${height - 8}" text-anchor="middle" fill="#555">${esc(caption)}</text>
</svg>
`;
}
