// Attack suite (issue 8, Prove 3): names built into paths. Channel names, archive names and ids,
// new names, member pins holding `../`, absolute paths, NUL and separators are refused on every
// tool that takes one, over a real MCP server and the OpenCode plugin, and not one byte changes
// anywhere in the temp tree (the project, its `.opencomms/`, and a sibling directory). A tampered
// state whose channel id is a path cannot make the store write outside `.opencomms/` either.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readPin, writePin } from '../../../src/store/pins.ts';
import { resolvePaths } from '../../../src/store/paths.ts';
import { startMcp } from '../../helpers/mcp-client.ts';
import { tempDirs } from '../../helpers/temp-dirs.ts';
import { snapshotTree } from '../../helpers/tree.ts';
import { seedMcpProject } from '../mcp-fixture.ts';
import { openCode } from './opencode-plugin.ts';
import { readStateSync } from '../../helpers/state-files.ts';

const NAMES = [
  '../escape',
  '../../etc/passwd',
  '/etc/passwd',
  '/tmp/evil',
  'a/../../b',
  '..\\..\\win',
  'C:\\Windows\\x',
  'a\u0000b',
  '\u0000',
  '.',
  '..',
  './x',
  '~/.ssh',
  '%2e%2e%2fx',
  'chn_../../x',
  'chn_..',
  `chn_${'a'.repeat(65)}`,
  'x/.',
  'state.json',
  '.state.lock',
];

/** Every tool argument that names something, with one of the names in it. */
const attacks = (name: string): Array<[string, Record<string, unknown>]> => [
  ['opencomms_create', { channel: name, role: 'Lead', role_prompt: 'p' }],
  ['opencomms_join', { channel: name, role: 'Lead', role_prompt: 'p' }],
  ['opencomms_send', { channel: name, content: 'x' }],
  ['opencomms_inbox', { channel: name }],
  ['opencomms_history', { channel: name }],
  ['opencomms_update_role', { channel: name, role_prompt: 'p' }],
  ['opencomms_pause', { channel: name }],
  ['opencomms_resume', { channel: name }],
  ['opencomms_disconnect', { channel: name }],
  ['opencomms_timer', { channel: name, action: 'start' }],
  ['opencomms_save_session', { channel: name }],
  ['opencomms_resume_session', { channel: name }],
  ['opencomms_resume_session', { channel: 'old', new_name: name }],
  ['opencomms_delete_session', { channel: name, confirm: true }],
  ['opencomms_archive', { mode: 'summary', channel: name }],
  ['opencomms_archive', { mode: 'messages', channel: name }],
  ['opencomms_status', { channel: name }],
];

const tempDir = tempDirs('opencomms-paths-');
/** A temp root holding the project and a sibling directory an escape would land in. */
function tree() {
  const root = tempDir();
  mkdirSync(join(root, 'project'));
  mkdirSync(join(root, 'sibling'));
  writeFileSync(join(root, 'sibling', 'keep.txt'), 'untouched\n');
  return { root, project: join(root, 'project') };
}

describe('names with ../, absolute paths and NUL are refused; nothing is written anywhere', () => {
  it('MCP: every naming argument of every tool', async () => {
    const { root, project } = tree();
    const p = await seedMcpProject(project);
    const before = snapshotTree(root);
    const h = await startMcp(project, { pin: p.pin });
    try {
      for (const name of NAMES)
        for (const [tool, args] of attacks(name)) {
          const r = await h.call(tool, args);
          // status with an unknown channel is an empty (ok) read; everything else is a refusal.
          expect([tool, name, r.ok]).toEqual([tool, name, tool === 'opencomms_status']);
        }
    } finally {
      await h.close();
    }
    expect(snapshotTree(root)).toEqual(before);
  }, 60_000);

  it('OpenCode: every naming argument of every tool', async () => {
    const { root, project } = tree();
    const oc = await openCode(project);
    expect((await oc.call('ses_a', 'opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'p' })).ok).toBe(
      true,
    );
    const before = snapshotTree(root);
    for (const name of NAMES)
      for (const [tool, args] of attacks(name)) {
        const r = await oc.call('ses_a', tool, args);
        expect([tool, name, r.ok]).toEqual([tool, name, tool === 'opencomms_status']);
      }
    expect(snapshotTree(root)).toEqual(before);
  });

  it('a pin holding a path or a line break leaves the server unpinned; pins with such ids are never written or read', async () => {
    const { root, project } = tree();
    const before = snapshotTree(root);
    for (const pin of ['../x', '/etc/passwd', 'sess_a\nsess_b']) {
      const h = await startMcp(project, { pin });
      expect((await h.call('opencomms_create', { channel: 'team', role: 'Lead', role_prompt: 'p' })).data?.reason).toBe(
        'identity_unpinned',
      );
      await h.close();
    }
    const paths = resolvePaths(project);
    for (const id of NAMES) {
      await expect(writePin(paths, { member_id: id, host: 'mcp' })).rejects.toMatchObject({
        refusal: { data: { reason: 'invalid_member_id' } },
      });
      expect(await readPin(paths, id)).toBeNull();
    }
    expect(snapshotTree(root)).toEqual(before);
  }, 60_000);

  it('a tampered state whose channel id is a path cannot make the store write outside .opencomms/', async () => {
    const { root, project } = tree();
    const p = await seedMcpProject(project);
    const file = join(project, '.opencomms', 'state.json');
    const s = readStateSync(project) as any; // the whole state: state.json and its journal
    s.channels.fuzz.id = '../../sibling/evil';
    for (const e of Object.values(s.messages) as Array<{ channel_id: string }>)
      if (e.channel_id !== s.channels.old.id) e.channel_id = '../../sibling/evil';
    writeFileSync(`${file}.tmp`, JSON.stringify(s));
    renameSync(`${file}.tmp`, file);
    const outside = (t: Record<string, string>) =>
      Object.fromEntries(Object.entries(t).filter(([k]) => !k.startsWith('project/.opencomms/')));
    const before = outside(snapshotTree(root));
    const h = await startMcp(project, { pin: p.pin });
    try {
      await h.call('opencomms_pull', {}); // would move delivered mail to a history log named by the id
      await h.call('opencomms_save_session', { channel: 'fuzz' }); // would write an archive named by the id
      await h.call('opencomms_history', { channel: 'fuzz' });
    } finally {
      await h.close();
    }
    const after = snapshotTree(root);
    expect(outside(after)).toEqual(before);
    expect(Object.keys(after).filter((k) => k.includes('evil'))).toEqual([]);
  }, 60_000);
});
