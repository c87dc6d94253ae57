// `/OpenComms <Subcommand> [Key=Value …] [free text]` (hosts.md "OpenCode"): deterministic parsing
// into an engine-bound tool call, and a plain-text rendering of the result's data.
import type { ToolResult } from '../../src/protocol/result.ts';

const KEYS = ['channel', 'as', 'roleprompt', 'action', 'limitms', 'limitrole', 'to', 'broadcast', 'target'] as const;
type Key = (typeof KEYS)[number];

export interface Parsed {
  sub: string;
  keys: Partial<Record<Key, string>>;
  free: string;
}

const TOKEN = /([A-Za-z][A-Za-z0-9_-]*)=(?:"([^"]*)"|'([^']*)'|(\S+))|"([^"]*)"|'([^']*)'|(\S+)/g;

export function parseSlash(text: string): Parsed {
  const keys: Parsed['keys'] = {};
  const free: string[] = [];
  let sub = '';
  for (const m of text.matchAll(TOKEN)) {
    const [whole, key, dq, sq, bare, fdq, fsq, word] = m;
    if (key !== undefined) {
      const k = key.toLowerCase() as Key;
      if ((KEYS as readonly string[]).includes(k)) {
        keys[k] = dq ?? sq ?? bare ?? '';
        continue;
      }
      if (!sub) sub = whole;
      else free.push(whole);
      continue;
    }
    const value = fdq ?? fsq ?? word ?? '';
    if (!sub) sub = value;
    else free.push(value);
  }
  return { sub: sub.replace(/[_-]/g, '').toLowerCase(), keys, free: free.join(' ').trim() };
}

export const SUBCOMMANDS = [
  'Create',
  'Join',
  'Status',
  'Inbox',
  'History',
  'Pause',
  'Resume',
  'Disconnect',
  'UpdateRole',
  'Kick',
  'Timer',
];

/** The tool a subcommand maps to and its arguments, or a usage refusal. */
export function toToolCall(p: Parsed): { tool: string; args: Record<string, unknown> } | { usage: string } {
  const channel = p.keys.channel;
  const prompt = p.keys.roleprompt ?? p.free;
  switch (p.sub) {
    case 'create':
    case 'join':
      return { tool: `opencomms_${p.sub}`, args: { channel, role: p.keys.as, role_prompt: prompt } };
    case 'status':
      return { tool: 'opencomms_status', args: channel ? { channel } : {} };
    case 'inbox':
    case 'history':
    case 'pause':
    case 'resume':
    case 'disconnect':
      return { tool: `opencomms_${p.sub}`, args: { channel } };
    case 'updaterole':
      return { tool: 'opencomms_update_role', args: { channel, role_prompt: prompt } };
    case 'kick':
      return {
        tool: 'opencomms_kick',
        args: { channel, target_session_id: p.keys.target, target_role: p.keys.target },
      };
    case 'timer': {
      const limit = p.keys.limitms === undefined ? undefined : Number(p.keys.limitms);
      return {
        tool: 'opencomms_timer',
        args: { channel, action: p.keys.action ?? 'status', limit_ms: limit, to: p.keys.to ?? p.keys.limitrole },
      };
    }
    default:
      return { usage: `Unknown subcommand "${p.sub}". Supported: ${SUBCOMMANDS.join(', ')}.` };
  }
}

export const usageFor = (sub: string) =>
  `Usage: /OpenComms ${sub === 'join' ? 'Join' : 'Create'} Channel=<name> As=<role> [role instructions]`;

/** A result's data as the tool sent it; each field is shown as it is, so none needs its type here. */
type Fields = Record<string, unknown>;

/** `OpenComms: <message>` plus a compact rendering of the data for reads. */
export function render(sub: string, r: ToolResult): string {
  const lines = [`OpenComms: ${r.message}`];
  const d = (r.data ?? {}) as Fields;
  if (!r.ok) {
    if (d.reason) lines.push(`reason: ${d.reason}`);
    return lines.join('\n');
  }
  if (sub === 'status')
    for (const c of (d.channels ?? []) as Fields[]) {
      lines.push(`${c.name}${c.paused ? ' [PAUSED]' : ''}: ${c.pending_messages} pending, ${c.total_messages} live`);
      for (const m of (c.members ?? []) as Fields[])
        lines.push(
          `  ${m.role} (${m.session_id}, ${m.host}, ${m.delivery_mode})${m.stale ? ' [STALE]' : ''} pending ${m.pending}, ${m.deliverability}`,
        );
    }
  if (sub === 'inbox' || sub === 'history')
    for (const m of (d.messages ?? []) as Fields[])
      lines.push(
        `- ${m.message_id} ${m.sender_role} ${m.message_type} hop ${m.hop_count} ${m.delivery_status}:\n${m.content}`,
      );
  if (sub === 'timer')
    lines.push(
      `active: ${d.active_member_id ?? 'none'}; total ${d.total_ms} ms; limit ${d.limit_ms ?? 'none'}${d.limit_reached ? ' (reached)' : ''}`,
      ...Object.entries(d.elapsed_ms_by_role ?? {}).map(([role, ms]) => `  ${role}: ${ms} ms`),
    );
  return lines.join('\n');
}
