// channelById keeps an index of channel names by id per plain `channels` object; these hold it to
// the scan it replaced while channels come, go and change names under it.
import { describe, expect, it } from 'vitest';
import { channelById } from '../../src/engine/lookup.ts';
import { raw, track } from '../../src/protocol/draft.ts';
import { emptyState, type Channel, type State } from '../../src/protocol/schema.ts';

const channel = (id: string, name: string) => ({ id, name }) as unknown as Channel;

function stateWith(...chs: Channel[]): State {
  const s = emptyState();
  for (const ch of chs) s.channels[ch.name] = ch;
  return s;
}

describe('channelById', () => {
  it('finds each channel by id, and nothing for an unknown id', () => {
    const s = stateWith(channel('chn_a', 'alpha'), channel('chn_b', 'beta'));
    expect(channelById(s, 'chn_b')?.name).toBe('beta');
    expect(channelById(s, 'chn_a')?.name).toBe('alpha');
    expect(channelById(s, 'chn_x')).toBeUndefined();
  });

  it('follows channels deleted, re-created under the same name with a new id, and moved to another key', () => {
    const s = stateWith(channel('chn_a', 'alpha'), channel('chn_b', 'beta'));
    expect(channelById(s, 'chn_a')?.name).toBe('alpha'); // the index is built
    delete s.channels.alpha;
    expect(channelById(s, 'chn_a')).toBeUndefined();
    s.channels.alpha = channel('chn_c', 'alpha');
    expect(channelById(s, 'chn_c')?.id).toBe('chn_c');
    expect(channelById(s, 'chn_a')).toBeUndefined();
    s.channels.gamma = s.channels.beta!;
    delete s.channels.beta;
    expect(channelById(s, 'chn_b')).toBe(s.channels.gamma);
  });

  it('answers inside a mutation through the draft, so that what the caller writes is recorded', () => {
    const s = stateWith(channel('chn_a', 'alpha'));
    const d = track(s);
    const ch = channelById(d.root, 'chn_a')!;
    expect(raw(ch)).toBe(s.channels.alpha);
    ch.name = 'renamed';
    expect(d.ops()).toEqual([['s', ['channels', 'alpha', 'name'], 'renamed']]);
  });
});
