// A machine's diagram as SVG, drawn from its JSON definition (`machine.toJSON()`, the same data
// `npm run viz` writes to visualizations/<name>.json). Pure and dependency-free: states are laid
// out in columns by their distance from the initial state, edges are curves labelled with their
// events (guards dropped: the Mermaid sources keep them). Every state is a `<g data-state="…">`,
// so a page highlights the current state with a class and no redraw.

interface JsonTransition {
  eventType: string;
  target?: string[];
}
interface JsonState {
  key: string;
  type: string;
  transitions?: JsonTransition[];
}
export interface MachineJson {
  id: string;
  initial?: { target?: string[] };
  states: Record<string, JsonState>;
}

/** Layout, in SVG user units: wide enough for the longest state name, tall enough for a label row. */
const BOX_W = 132;
const BOX_H = 40;
const COL_GAP = 150;
const ROW_GAP = 34;
const MARGIN = 36;
/** Room above the top row for a self-loop and its label. */
const MARGIN_TOP = 72;
/** Characters of an edge label before it is cut (the full list is in the title tooltip). */
const LABEL_CHARS = 26;

/** Colours for the file on its own (README, an image viewer). `:where()` keeps them at zero
 *  specificity, so a page that inlines the SVG (the console) restyles it with plain rules. */
const STYLE = [
  ':where(svg.machine) .bg{fill:#ffffff}',
  ':where(svg.machine) text{font:12px ui-sans-serif,system-ui,sans-serif;fill:#1f2328}',
  ':where(svg.machine) .state rect{fill:#f6f8fa;stroke:#57606a;stroke-width:1.5}',
  ':where(svg.machine) .state.final rect{stroke-width:3}',
  ':where(svg.machine) .state text{font-weight:600}',
  ':where(svg.machine) .edge path,:where(svg.machine) .initial-edge{fill:none;stroke:#8c959f;stroke-width:1.2}',
  ':where(svg.machine) .edge text{font-size:10.5px;fill:#57606a}',
  ':where(svg.machine) marker path,:where(svg.machine) .initial{fill:#8c959f}',
].join('');

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const keyOf = (target: string) => target.slice(target.lastIndexOf('.') + 1);

interface Edge {
  from: string;
  to: string;
  events: string[];
}

/** Edges merged per (from, to) pair, events in declaration order. */
function edgesOf(m: MachineJson): Edge[] {
  const byPair = new Map<string, Edge>();
  for (const [from, s] of Object.entries(m.states))
    for (const t of s.transitions ?? [])
      for (const target of t.target?.length ? t.target.map(keyOf) : [from]) {
        const k = `${from}>${target}`;
        const e = byPair.get(k) ?? { from, to: target, events: [] };
        if (!e.events.includes(t.eventType)) e.events.push(t.eventType);
        byPair.set(k, e);
      }
  return [...byPair.values()];
}

/** Columns by breadth-first distance from the initial state; unreachable states go last. */
function columnsOf(m: MachineJson, edges: Edge[]): string[][] {
  const names = Object.keys(m.states);
  const initial = m.initial?.target?.[0] ? keyOf(m.initial.target[0]) : names[0]!;
  const depth = new Map<string, number>([[initial, 0]]);
  const queue = [initial];
  while (queue.length) {
    const at = queue.shift()!;
    for (const e of edges)
      if (e.from === at && !depth.has(e.to)) {
        depth.set(e.to, depth.get(at)! + 1);
        queue.push(e.to);
      }
  }
  const last = Math.max(0, ...depth.values()) + 1;
  const cols: string[][] = [];
  for (const n of names) (cols[depth.get(n) ?? last] ??= []).push(n);
  return cols.filter(Boolean);
}

/** `standalone`: with its own colours and background (a file); without, for a page that styles it. */
export function toSvg(m: MachineJson, opts: { standalone?: boolean } = {}): string {
  const standalone = opts.standalone ?? true;
  const edges = edgesOf(m);
  const cols = columnsOf(m, edges);
  const rows = Math.max(...cols.map((c) => c.length));
  const body = rows * BOX_H + (rows - 1) * ROW_GAP;
  const height = MARGIN_TOP + body + MARGIN;
  const pos = new Map<string, { x: number; y: number }>();
  cols.forEach((col, ci) => {
    const colH = col.length * BOX_H + (col.length - 1) * ROW_GAP;
    for (const [ri, n] of col.entries())
      pos.set(n, { x: MARGIN + ci * (BOX_W + COL_GAP), y: MARGIN_TOP + (body - colH) / 2 + ri * (BOX_H + ROW_GAP) });
  });
  const width = MARGIN * 2 + cols.length * BOX_W + (cols.length - 1) * COL_GAP;
  const pairs = new Set(edges.map((e) => `${e.from}>${e.to}`));
  const parts: string[] = [];

  for (const e of edges) {
    const a = pos.get(e.from)!;
    const b = pos.get(e.to)!;
    const label = e.events.join(', ');
    const shown = label.length > LABEL_CHARS ? `${label.slice(0, LABEL_CHARS - 1)}…` : label;
    let d: string;
    let lx: number;
    let ly: number;
    if (e.from === e.to) {
      // A self-loop above the box.
      const x = a.x + BOX_W / 2;
      d = `M ${x - 18} ${a.y} C ${x - 30} ${a.y - 34}, ${x + 30} ${a.y - 34}, ${x + 18} ${a.y}`;
      lx = x;
      ly = a.y - 30;
    } else {
      // Anchors slide along the facing sides toward the other box, so edges fanning out of one
      // state do not all meet in one point; a twin pair is pulled apart by a few units more.
      const twin = pairs.has(`${e.to}>${e.from}`);
      const slide = (d: number) => Math.sign(d) * Math.min(Math.abs(d) / 4, BOX_H * 0.3);
      const apart = twin ? (b.x >= a.x ? 6 : -6) : 0;
      const [sx, sy] =
        b.x > a.x
          ? [a.x + BOX_W, a.y + BOX_H / 2 + slide(b.y - a.y) + apart]
          : b.x < a.x
            ? [a.x, a.y + BOX_H / 2 + slide(b.y - a.y) + apart]
            : [a.x + BOX_W / 2 + 20, b.y > a.y ? a.y + BOX_H : a.y];
      const [tx, ty] =
        b.x > a.x
          ? [b.x, b.y + BOX_H / 2 + slide(a.y - b.y) + apart]
          : b.x < a.x
            ? [b.x + BOX_W, b.y + BOX_H / 2 + slide(a.y - b.y) + apart]
            : [b.x + BOX_W / 2 + 20, b.y > a.y ? b.y : b.y + BOX_H];
      // The normal flips with the direction, so one sign bends two edges between the same pair
      // to opposite sides; an edge within a column bends out of it, clear of the boxes between.
      const bend = b.x === a.x ? -(40 + Math.abs(b.y - a.y) / 4) : twin ? 24 : 0;
      const mx = (sx + tx) / 2;
      const my = (sy + ty) / 2;
      const len = Math.hypot(tx - sx, ty - sy) || 1;
      const [nx, ny] = [-(ty - sy) / len, (tx - sx) / len];
      const cx = mx + nx * bend * 2;
      const cy = my + ny * bend * 2;
      d = `M ${sx} ${sy} Q ${cx} ${cy}, ${tx} ${ty}`;
      lx = mx + nx * bend;
      ly = my + ny * bend;
    }
    parts.push(
      `<g class="edge" data-from="${esc(e.from)}" data-to="${esc(e.to)}"><title>${esc(`${e.from} → ${e.to}: ${label}`)}</title>` +
        `<path d="${d}" marker-end="url(#arrow-${esc(m.id)})"/>` +
        `<text x="${lx.toFixed(1)}" y="${(ly - 4).toFixed(1)}" text-anchor="middle">${esc(shown)}</text></g>`,
    );
  }
  for (const [name, s] of Object.entries(m.states)) {
    const p = pos.get(name)!;
    const final = s.type === 'final';
    parts.push(
      `<g class="state${final ? ' final' : ''}" data-state="${esc(name)}"><title>${esc(name)}${final ? ' (final)' : ''}</title>` +
        `<rect x="${p.x}" y="${p.y}" width="${BOX_W}" height="${BOX_H}" rx="${final ? 4 : 12}"/>` +
        `<text x="${p.x + BOX_W / 2}" y="${p.y + BOX_H / 2 + 5}" text-anchor="middle">${esc(name)}</text></g>`,
    );
  }
  const init = m.initial?.target?.[0] ? pos.get(keyOf(m.initial.target[0])) : undefined;
  const start = init
    ? `<circle class="initial" cx="${init.x - 16}" cy="${init.y + BOX_H / 2}" r="6"/><path class="initial-edge" d="M ${init.x - 10} ${init.y + BOX_H / 2} L ${init.x} ${init.y + BOX_H / 2}"/>`
    : '';
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" class="machine" data-machine="${esc(m.id)}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(m.id)} state machine">` +
    (standalone ? `<style>${STYLE}</style><rect class="bg" width="${width}" height="${height}"/>` : '') +
    `<defs><marker id="arrow-${esc(m.id)}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>` +
    start +
    parts.join('') +
    '</svg>\n'
  );
}
