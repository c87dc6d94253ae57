// docs/architecture.md embeds each generated diagram between markers, so `npm run viz` keeps it
// current and a test can tell when it is not.
import type { AnyStateMachine } from 'xstate';

/** The page that embeds the diagrams, relative to the repository root. */
export const DIAGRAMS_DOC = 'docs/architecture.md';

export const machinesByName = (registry: Record<string, { machine: unknown }>) =>
  Object.fromEntries(Object.entries(registry).map(([k, v]) => [k, v.machine as AnyStateMachine]));

const block = (name: string, mmd: string) =>
  `<!-- diagram:${name} -->\n\`\`\`mermaid\n${mmd}\`\`\`\n<!-- /diagram:${name} -->`;

export function docWithDiagrams(doc: string, files: Record<string, string>): string {
  let out = doc;
  for (const [file, text] of Object.entries(files)) {
    if (!file.endsWith('.mmd')) continue;
    const name = file.slice(0, -4);
    const re = new RegExp(`<!-- diagram:${name} -->[\\s\\S]*?<!-- /diagram:${name} -->`);
    if (!re.test(out)) throw new Error(`${DIAGRAMS_DOC} has no <!-- diagram:${name} --> marker`);
    out = out.replace(re, () => block(name, text));
  }
  return out;
}
