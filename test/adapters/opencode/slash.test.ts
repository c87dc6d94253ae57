// The /OpenComms grammar (FEATURES.md §6.6): deterministic Key=value parsing, subcommand
// normalisation, free text as role prompt, and the tool call each subcommand becomes.
import { describe, expect, it } from 'vitest';
import { parseSlash, render, toToolCall } from '../../../adapters/opencode/slash.ts';

describe('/OpenComms parsing', () => {
  it('normalises the subcommand: UpdateRole = update_role = UPDATE-ROLE', () => {
    for (const s of ['UpdateRole', 'update_role', 'UPDATE-ROLE'])
      expect(parseSlash(`${s} Channel=x`).sub).toBe('updaterole');
  });

  it('reads case-insensitive keys with double, single or bare values; the rest is free text', () => {
    const p = parseSlash(`Create channel=Review AS="Data Wrangler" You clean the data x=y 'and more'`);
    expect(p).toEqual({
      sub: 'create',
      keys: { channel: 'Review', as: 'Data Wrangler' },
      free: 'You clean the data x=y and more',
    });
    expect(toToolCall(p)).toEqual({
      tool: 'opencomms_create',
      args: { channel: 'Review', role: 'Data Wrangler', role_prompt: 'You clean the data x=y and more' },
    });
  });

  it('RolePrompt= wins over free text', () => {
    const p = parseSlash(`Join Channel=r As=Reviewer RolePrompt='Review carefully' ignored words`);
    expect(toToolCall(p)).toMatchObject({ args: { role_prompt: 'Review carefully' } });
  });

  it('Kick passes Target as both id and role; Timer defaults to status and takes LimitRole as To', () => {
    expect(toToolCall(parseSlash('Kick Channel=c Target=Reviewer'))).toEqual({
      tool: 'opencomms_kick',
      args: { channel: 'c', target_session_id: 'Reviewer', target_role: 'Reviewer' },
    });
    expect(toToolCall(parseSlash('Timer Channel=c'))).toMatchObject({ args: { action: 'status' } });
    expect(toToolCall(parseSlash('Timer Channel=c Action=set_limit LimitMs=5000 LimitRole=Builder'))).toEqual({
      tool: 'opencomms_timer',
      args: { channel: 'c', action: 'set_limit', limit_ms: 5000, to: 'Builder' },
    });
  });

  it('an unknown subcommand lists the supported ones', () => {
    const call = toToolCall(parseSlash('Frobnicate Channel=c'));
    expect('usage' in call && call.usage).toMatch(
      /Create, Join, Status, Inbox, History, Pause, Resume, Disconnect, UpdateRole, Kick, Timer/,
    );
  });

  it('renders the data of reads, not only the message', () => {
    const text = render('status', {
      ok: true,
      message: '1 channel(s), 2 pending.',
      data: {
        channels: [
          {
            name: 'review',
            paused: true,
            pending_messages: 2,
            total_messages: 2,
            members: [
              {
                role: 'Builder',
                session_id: 's1',
                host: 'opencode',
                delivery_mode: 'push',
                stale: false,
                pending: 0,
                deliverability: 'paused',
              },
            ],
          },
        ],
      },
    });
    expect(text).toBe(
      'OpenComms: 1 channel(s), 2 pending.\nreview [PAUSED]: 2 pending, 2 live\n  Builder (s1, opencode, push) pending 0, paused',
    );
    expect(render('join', { ok: false, message: 'No channel "x".', data: { reason: 'channel_not_found' } })).toBe(
      'OpenComms: No channel "x".\nreason: channel_not_found',
    );
  });
});
