// Mermaid `stateDiagram-v2` from a machine definition: states, guards on edges, and the reason
// code of every refusing transition, so a reader sees each send gate without opening the code.
import type { AnyStateMachine, AnyStateNode, AnyTransitionDefinition } from 'xstate';
import { toSvg, type MachineJson } from './svg.ts';

const nodeId = (n: AnyStateNode) => n.id.replace(/[^A-Za-z0-9_]/g, '_');

function edgeLabel(t: AnyTransitionDefinition): string {
  const parts = [t.eventType];
  if (t.guard)
    parts.push(`[${typeof t.guard === 'string' ? t.guard : ((t.guard as { type?: string }).type ?? 'guard')}]`);
  const actions = (t.actions ?? []).map((a) => {
    if (typeof a === 'string') return a;
    const { type, params } = a as { type?: string; params?: { reason?: string } };
    return params?.reason ? `${type} ${params.reason}` : (type ?? 'action');
  });
  if (actions.length) parts.push(`/ ${actions.join(', ')}`);
  return parts.join(' ').replace(/:/g, '');
}

export function toMermaid(machine: AnyStateMachine): string {
  const out = ['stateDiagram-v2'];
  const root = machine.root;
  const kids = Object.values(root.states) as AnyStateNode[];
  const initial = root.initial?.target?.[0] as AnyStateNode | undefined;
  if (initial) out.push(`  [*] --> ${nodeId(initial)}`);
  for (const k of kids) {
    out.push(`  state "${k.key}" as ${nodeId(k)}`);
    if (k.type === 'final') out.push(`  ${nodeId(k)} --> [*]`);
  }
  for (const k of kids)
    for (const list of k.transitions.values())
      for (const t of list)
        for (const target of (t.target as AnyStateNode[] | undefined) ?? [k])
          out.push(`  ${nodeId(k)} --> ${nodeId(target)}: ${edgeLabel(t)}`);
  return `${out.join('\n')}\n`;
}

/** Everything `npm run viz` writes, by file name under visualizations/. */
export function renderAll(machines: Record<string, AnyStateMachine>): Record<string, string> {
  const files: Record<string, string> = {};
  for (const [name, m] of Object.entries(machines)) {
    files[`${name}.mmd`] = toMermaid(m);
    files[`${name}.json`] = `${JSON.stringify(m.toJSON(), null, 2)}\n`;
    files[`${name}.svg`] = toSvg(JSON.parse(files[`${name}.json`]!) as MachineJson);
  }
  return files;
}
