// Sessions through `opencomms mcp` (FEATURES.md §2.3, §2.6, §5.10, LCY-2..6): save, the saved
// tombstone, archive reads, restore with compact_context for joiners, delete of a live channel, of
// an archive by id and of a saved channel by name.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BEGIN_MARKER, END_MARKER } from '../../../src/framing.ts';
import { ok, pair, pinFor, readState, refused, useMcpProject } from '../../helpers/mcp-fixture.ts';

const p = useMcpProject({
  A: { pin: pinFor('a') },
  B: { pin: pinFor('b') },
});
const archiveFile = (id: string) => join(p.dir, '.opencomms', 'archives', `${id}.json`);

/** A channel of A alone, saved: B is a stranger to its archive. Returns the archive id. */
async function savedSolo(channel: string): Promise<string> {
  await ok(p.h.A, 'opencomms_create', { channel, role: 'Alpha', role_prompt: 'p' });
  return (await ok(p.h.A, 'opencomms_save_session', { channel })).data.archive_id;
}

/** A pair channel with one message, saved by A with `summary`; returns the archive id. */
async function savedPair(channel: string, summary = 'We decided to ship X.'): Promise<string> {
  await pair(p.h.A, p.h.B, channel);
  await ok(p.h.A, 'opencomms_send', { channel, content: 'archived words' });
  const saved = await ok(p.h.A, 'opencomms_save_session', { channel, summary });
  expect(saved.data).toEqual({ archive_id: saved.data.archive_id, message_count: 1, summary });
  return saved.data.archive_id as string;
}

describe('save', () => {
  it('LCY-2 writes the archive, leaves a saved tombstone, takes the channel’s mail out of live state', async () => {
    const id = await savedPair('save');
    expect(existsSync(archiveFile(id))).toBe(true);
    const state = readState(p.dir);
    expect(state.channels.save).toMatchObject({ id, lifecycle: 'saved', members: [] });
    expect(Object.values(state.messages).some((e: any) => e.channel_id === id)).toBe(false);
    expect(state.queues[p.pin.B]).toBeUndefined();
  });

  it('LCY-3 the saved name answers lifecycle_refused with the restore hint, for members and strangers alike', async () => {
    await savedSolo('saved-name');
    for (const [h, tool, args] of [
      [p.h.A, 'opencomms_send', { channel: 'saved-name', content: 'late' }],
      [p.h.A, 'opencomms_history', { channel: 'saved-name' }],
      [p.h.A, 'opencomms_create', { channel: 'saved-name', role: 'Alpha', role_prompt: 'p' }],
      [p.h.B, 'opencomms_join', { channel: 'saved-name', role: 'Beta', role_prompt: 'p' }],
    ] as const) {
      const r = await refused(h, tool, args, 'lifecycle_refused');
      expect(r.data).toMatchObject({ lifecycle: 'saved' });
      expect(r.data.hint).toContain('opencomms_resume_session');
    }
  });
});

describe('archive reads', () => {
  it('list is scoped to the archived roster; summary and messages by name or id, framed', async () => {
    const id = await savedPair('reads');
    const list = await ok(p.h.B, 'opencomms_archive', {});
    expect(list.data.archives).toContainEqual(
      expect.objectContaining({
        archive_id: id,
        name: 'reads',
        saved_by_role: 'Alpha',
        message_count: 1,
        roles: ['Alpha', 'Beta'],
      }),
    );
    const solo = await savedSolo('reads-solo');
    expect(
      (await ok(p.h.B, 'opencomms_archive', { mode: 'list' })).data.archives.map((a: any) => a.archive_id),
    ).not.toContain(solo);
    expect(
      (await ok(p.h.A, 'opencomms_archive', { mode: 'list' })).data.archives.map((a: any) => a.archive_id),
    ).toEqual(expect.arrayContaining([id, solo]));
    const sum = await ok(p.h.A, 'opencomms_archive', { mode: 'summary', channel: 'reads' });
    expect(sum.data.archive_id).toBe(id);
    expect(sum.data.compact_context).toContain('We decided to ship X.');
    const msgs = await ok(p.h.B, 'opencomms_archive', { mode: 'messages', channel: id, limit: 5 });
    expect(msgs.data.messages).toHaveLength(1);
    expect(msgs.data.messages[0]).toMatchObject({ sender_role: 'Alpha', recipient_role: 'Beta', reply_to: null });
    expect(msgs.data.messages[0].content).toBe(`${BEGIN_MARKER}\narchived words\n${END_MARKER}`);
  });
});

describe('restore', () => {
  it('LCY-4 creates a new empty channel linked to the archive; its joiners get the compact_context', async () => {
    const id = await savedPair('resumed');
    const resumed = await ok(p.h.B, 'opencomms_resume_session', { channel: 'resumed' });
    expect(resumed.data).toMatchObject({
      name: 'resumed',
      parent_channel_id: id,
      members: [],
      archive_name: 'resumed',
    });
    expect(resumed.data.channel_id).not.toBe(id);
    const j = await ok(p.h.B, 'opencomms_join', { channel: 'resumed', role: 'Beta', role_prompt: 'Back again.' });
    expect(j.data.parent_channel_id).toBe(id);
    expect(j.data.compact_context).toContain('We decided to ship X.');
    const again = await ok(p.h.A, 'opencomms_join', { channel: 'resumed', role: 'Alpha', role_prompt: 'Back again.' });
    expect(again.data.compact_context).toContain('We decided to ship X.');
    // Nothing of the old channel came back: the new one starts empty.
    expect((await ok(p.h.A, 'opencomms_history', { channel: 'resumed' })).data.messages).toEqual([]);
  });
});

describe('delete', () => {
  it('LCY-6 a live channel by a member, then its archive by id: tombstone deleted, file gone', async () => {
    const id = await savedPair('del');
    await ok(p.h.B, 'opencomms_resume_session', { channel: 'del' });
    await ok(p.h.A, 'opencomms_join', { channel: 'del', role: 'Alpha', role_prompt: 'p' });
    await ok(p.h.B, 'opencomms_join', { channel: 'del', role: 'Beta', role_prompt: 'p' });
    expect((await ok(p.h.A, 'opencomms_delete_session', { channel: 'del', confirm: true })).data).toEqual({
      name: 'del',
      deleted: 'live',
    });
    expect(
      (await refused(p.h.B, 'opencomms_send', { channel: 'del', content: 'after delete' }, 'lifecycle_refused')).data
        .lifecycle,
    ).toBe('deleted');
    await refused(p.h.A, 'opencomms_delete_session', { channel: 'del', confirm: true }, 'lifecycle_refused');
    expect((await ok(p.h.B, 'opencomms_delete_session', { channel: id, confirm: true })).data).toEqual({
      name: 'del',
      deleted: 'archive',
    });
    expect(existsSync(archiveFile(id))).toBe(false);
    await refused(p.h.B, 'opencomms_archive', { mode: 'summary', channel: id }, 'archive_not_found');
  });

  it('LCY-6 a saved channel by name: confirm and the archived roster are required; the name is free again', async () => {
    await ok(p.h.A, 'opencomms_create', { channel: 'del-saved', role: 'Alpha', role_prompt: 'p' });
    const saved = await ok(p.h.A, 'opencomms_save_session', { channel: 'del-saved' });
    expect(saved.data.summary.length).toBeGreaterThan(0); // generated
    await refused(p.h.A, 'opencomms_delete_session', { channel: 'del-saved', confirm: false }, 'confirm_required');
    await refused(p.h.B, 'opencomms_delete_session', { channel: 'del-saved', confirm: true }, 'not_archived_member');
    expect((await ok(p.h.A, 'opencomms_delete_session', { channel: 'del-saved', confirm: true })).data).toEqual({
      name: 'del-saved',
      deleted: 'archive',
    });
    expect(existsSync(archiveFile(saved.data.archive_id))).toBe(false);
    expect(readState(p.dir).channels['del-saved']).toMatchObject({ lifecycle: 'deleted', members: [] });
    const fresh = await ok(p.h.A, 'opencomms_create', { channel: 'del-saved', role: 'Alpha', role_prompt: 'Fresh.' });
    expect(fresh.data.channel_id).not.toBe(saved.data.archive_id);
  });
});
