// Counts read as English: one member, one message; several members, several messages.
import { describe, expect, it } from 'vitest';
import { renderChannels } from '../../src/cli/commands/channels.ts';
import { renderChannelDetail, renderChannelList } from '../../src/cli/commands/channel.ts';

const live = (name: string, agents: number) => ({ name, paused: false, agents: Array(agents).fill({}) }) as never;
const saved = (message_count: number) =>
  ({ name: 'old', saved_at: 0, message_count, description: null, agents: [], summary: 's', archive_id: 'a' }) as never;

describe('counts', () => {
  it('channels: (1 member), (2 members), (0 members)', () => {
    expect(renderChannels([live('a', 1), live('b', 2), live('c', 0)])).toBe(
      'a (1 member)\nb (2 members)\nc (0 members)',
    );
  });

  it('channel list and get: 1 message, 2 messages', () => {
    expect(renderChannelList({ live: [], archived: [saved(1), saved(2)] })).toMatch(
      /^old \[saved 1970-01-01\] 1 message — .*\nold \[saved 1970-01-01\] 2 messages — /,
    );
    expect(renderChannelDetail({ kind: 'archived', ...(saved(1) as object) } as never)).toMatch(/\] 1 message — /);
  });
});
