// Id shapes (PROTOCOL.md, FEATURES.md §2.5, §4): minted ids match their patterns, and the
// patterns that guard file paths refuse anything that could leave their folder.
import { describe, expect, it } from 'vitest';
import {
  ARCHIVE_ID_RE,
  CHANNEL_ID_RE,
  CORRELATION_ID_RE,
  MEMBER_ID_RE,
  MESSAGE_ID_RE,
  isArchiveId,
  isMemberId,
  newChannelId,
  newCorrelationId,
  newMemberId,
  newMessageId,
} from '../../src/protocol/ids.ts';

describe('ids', () => {
  it('minted ids have the protocol shapes and are unique', () => {
    expect(newMessageId()).toMatch(MESSAGE_ID_RE);
    expect(newChannelId()).toMatch(CHANNEL_ID_RE);
    expect(newCorrelationId()).toMatch(CORRELATION_ID_RE);
    expect(newMemberId()).toMatch(/^sess_[0-9a-f]{24}$/);
    expect(newMemberId()).toMatch(MEMBER_ID_RE);
    expect(new Set(Array.from({ length: 1000 }, newMessageId)).size).toBe(1000);
  });

  it('ids drawn across many refills of the random pool never repeat, whatever their length', () => {
    const mixed = Array.from({ length: 3000 }, (_, i) =>
      (i % 3 === 0 ? newMemberId() : i % 3 === 1 ? newMessageId() : newCorrelationId()).replace(/^[a-z]+_/, ''),
    );
    expect(new Set(mixed).size).toBe(mixed.length);
    expect(mixed.every((x) => /^[0-9a-f]+$/.test(x) && !/^0+$/.test(x))).toBe(true);
  });

  it('path-building ids refuse traversal and separators', () => {
    for (const bad of ['../x', 'a/b', 'a\\b', '.hidden', '', 'x'.repeat(65), 'chn_../x', 'chn_a/b']) {
      expect(isMemberId(bad), bad).toBe(false);
      expect(isArchiveId(bad), bad).toBe(false);
    }
    expect(isMemberId('sess_0123456789abcdef01234567')).toBe(true);
    expect(isArchiveId(newChannelId())).toBe(true);
    expect(ARCHIVE_ID_RE.test('chn_')).toBe(false);
  });
});
