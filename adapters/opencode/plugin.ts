// The OpenCode plugin (classic `Plugin` hooks API of @opencode-ai/plugin 1.18; protocol.md "OpenCode plugin").
// Bundled into `.opencode/plugins/opencomms.js` with no bare imports. It exports exactly ONE
// plugin function. Identity comes from the tool context's `sessionID` only.
import { resolve } from 'node:path';
import type { Caller } from '../../src/engine/index.ts';
import { BATCH_SEPARATOR, frameIdMark } from '../../src/framing.ts';
import { routeLimit } from '../route-limits.ts';
import { refuse, type ToolResult } from '../../src/protocol/result.ts';
import type { State } from '../../src/protocol/schema.ts';
import { memberships } from '../../src/engine/lookup.ts';
import { roleInstructions } from '../../src/engine/roles.ts';
import { rosterGate } from '../../src/runtime/gates.ts';
import { openRuntime, type Runtime, type DeliveryDriver } from '../../src/runtime/runtime.ts';
import { normaliseWorktree } from '../../src/runtime/worktree.ts';
import { spawnDriver } from '../spawn.ts';
import { toolsFor, type ToolDef } from '../tools.ts';
import { splitFrames } from './frames.ts';
import { parseSlash, render, toToolCall, usageFor } from './slash.ts';

/** The slice of the OpenCode SDK client the plugin uses (v1 client, `{data, error}` results). */
interface Client {
  session: {
    get(o: { path: { id: string } }): Promise<{ data?: { id: string; parentID?: string }; error?: unknown }>;
    status(o?: unknown): Promise<{ data?: Record<string, { type: string }>; error?: unknown }>;
    messages(o: {
      path: { id: string };
    }): Promise<{ data?: Array<{ parts: Array<{ type: string; text?: string }> }>; error?: unknown }>;
    promptAsync?(o: {
      path: { id: string };
      body: { parts: Array<{ type: 'text'; text: string }> };
    }): Promise<{ error?: unknown }>;
    prompt(o: {
      path: { id: string };
      body: { parts: Array<{ type: 'text'; text: string }> };
    }): Promise<{ error?: unknown }>;
  };
}

interface PluginInput {
  client: Client;
  project?: { id?: string };
  directory: string;
  worktree?: string;
}

interface HostEvent {
  type: string;
  properties?: { sessionID?: string; info?: { id?: string }; status?: { type?: string } };
}

/** A failed status lookup counts as busy and is re-checked after this long while mail waits. */
const STATUS_RECHECK_MS = 2000;
const OPENCODE_HOSTS = new Set(['opencode', 'generic', 'opencode-comms']);

const failed = (r: { error?: unknown } | undefined) => !r || r.error !== undefined;

/** One instance per state dir and process: the host may load the file twice (directory and
 *  config entry); the second load shares the first runtime, subscription and sweep. The delivery policy
 *  (ownership, fallback, retries) is the runtime's; this class only translates to OpenCode. */
class Instance {
  readonly runtime: Runtime;
  private readonly status = new Map<string, 'idle' | 'busy'>();
  private readonly log: (l: string) => void;
  readonly worktree: string;
  readonly projectId: string;

  constructor(readonly input: PluginInput) {
    this.worktree = normaliseWorktree(input.worktree && input.worktree !== '/' ? input.worktree : input.directory);
    this.projectId = input.project?.id || 'global';
    this.log = (l) => process.stderr.write(`[opencomms] ${l}\n`);
    const driver: DeliveryDriver = {
      method: 'push',
      maxSize: routeLimit('opencode', 'push'),
      crossServer: true,
      hold: (rid) => this.hold(rid),
      deliver: (rid, text, ids, redelivery) => this.prompt(rid, text, ids, redelivery),
    };
    this.runtime = openRuntime(input.directory, {
      driver,
      spawn: spawnDriver(input.directory),
      deliverOnChange: true,
      log: this.log,
    });
  }

  /** Start-up after the host is serving: sweep, validate the roster against the host, subscribe. */
  async start() {
    await this.runtime.start();
    await this.runtime.deliveries.reconcile({
      hosts: OPENCODE_HOSTS,
      worktree: this.worktree,
      label: 'OpenCode',
      lookup: async (id) => {
        const r = await this.input.client.session.get({ path: { id } }).catch((e: unknown) => ({ error: e }));
        if (!failed(r)) return 'alive';
        return isNotFound(r.error) ? 'gone' : { error: describe(r.error) };
      },
    });
    await this.runtime.scan();
  }

  async recordError(message: string, channel_id?: string, session_id?: string) {
    await this.runtime.run({
      op: 'record_error',
      entry: { at: Date.now(), message, ...(channel_id ? { channel_id } : {}), ...(session_id ? { session_id } : {}) },
    });
  }

  /** The session is live in this server: it is served (and claimed) here. An unreadable state
   *  (incompatible, busy) is answered by the tool call itself, as a refusal. */
  markLocal(sid: string) {
    return this.runtime.serve(sid).catch(() => {});
  }

  setStatus(sid: string, s: 'idle' | 'busy') {
    this.status.set(sid, s);
  }

  statusOf(sid: string) {
    return this.status.get(sid);
  }

  /** A person started a turn of `sid`: a loop hold on it ends (wake-ops.ts personTurn). Looked at
   *  first, so a turn with no hold takes no lock. */
  async personTurn(sid: string) {
    const state = await this.runtime.peek().catch(() => null);
    if (state && memberships(state, sid).some(({ ch }) => ch.wakes?.[sid]?.held_by === 'loop'))
      await this.runtime.run({ op: 'person_turn', session: sid }).catch(() => {});
  }

  /** Never prompt a busy session: the tracked status, else the host's word; a failed lookup
   *  counts as busy and is re-checked. */
  private async hold(rid: string) {
    const known = this.status.get(rid);
    if (known) return known === 'busy' ? ('busy' as const) : null;
    const r = await this.input.client.session.status().catch((e: unknown) => ({ error: e, data: undefined }));
    if (failed(r)) {
      setTimeout(() => this.runtime.wake(rid), STATUS_RECHECK_MS).unref?.();
      return 'busy' as const;
    }
    const t = r.data?.[rid]?.type;
    return t === 'busy' || t === 'retry' ? ('busy' as const) : null;
  }

  /** "Delivered" = the host accepted the prompt. After a crash, the batch may already be in the
   *  session: its message ids are looked for first, so it is never injected twice. A re-drained
   *  batch may also hold newer mail (the swept envelopes come first): only the frames the session
   *  does not hold yet are prompted. */
  private async prompt(rid: string, text: string, ids: string[], redelivery: boolean) {
    const s = this.input.client.session;
    if (redelivery) {
      const r = await s.messages({ path: { id: rid } }).catch(() => undefined);
      const seen = (r?.data ?? []).flatMap((m) => m.parts.map((p) => p.text ?? '')).join('\n');
      const held = (id: string) => seen.includes(frameIdMark(id));
      if (ids.every(held)) return;
      const frames = splitFrames(text);
      if (ids.some(held) && frames.length === ids.length)
        text = frames.filter((_, i) => !held(ids[i]!)).join(BATCH_SEPARATOR);
    }
    const body = { path: { id: rid }, body: { parts: [{ type: 'text' as const, text }] } };
    const r = s.promptAsync ? await s.promptAsync(body) : await s.prompt(body);
    if (failed(r)) throw new Error(`prompt refused: ${describe(r.error)}`);
    this.status.set(rid, 'busy'); // the turn starts now; its idle event releases the next batch
  }

  caller(sid: string): Caller {
    return {
      session_id: sid,
      host: 'opencode',
      surface: 'cli',
      delivery_mode: 'push',
      host_session_id: sid,
      project_id: this.projectId,
      worktree: this.worktree,
    };
  }

  /** Adapter pre-checks (protocol.md "Result shape"), then the engine. */
  async call(def: ToolDef, args: Record<string, unknown>, sid: string): Promise<ToolResult> {
    if (!sid) return refuse('context_missing', 'The host supplied no session id; report an adapter fault.');
    await this.markLocal(sid);
    if (def.name === 'opencomms_create' || def.name === 'opencomms_join') {
      const r = await this.input.client.session
        .get({ path: { id: sid } })
        .catch((e: unknown) => ({ error: e, data: undefined }));
      if (failed(r)) {
        await this.recordError(`Root lookup of OpenCode session ${sid} failed: ${describe(r.error)}`, undefined, sid);
        return refuse(
          'root_lookup_failed',
          'OpenCode could not confirm this is a root session (logged). Retry shortly.',
        );
      }
      if (r.data?.parentID) return refuse('child_session', 'Only root sessions may link. Use the parent session.');
    }
    const prepared = def.prepare(args);
    if (!prepared.ok) return refuse('invalid_argument', prepared.problem);
    const gate = def.linked ? (state: Readonly<State>) => rosterGate(state, sid, args.channel, notLinked) : undefined;
    const actor = { sid, project_id: this.projectId, worktree: this.worktree };
    return this.runtime.run(
      prepared.command({
        pin: sid,
        caller: () => this.caller(sid),
        actor,
        resultLimit: routeLimit('opencode', 'tool_result'),
      }),
      gate,
    );
  }
}

const notLinked = () => refuse('not_linked', 'This session is in no OpenComms channel. Create or join one first.');

const describe = (e: unknown) =>
  e instanceof Error ? e.message : typeof e === 'string' ? e : (JSON.stringify(e) ?? 'unknown error');
const isNotFound = (e: unknown) =>
  /not ?found|404/i.test(describe(e)) || (e as { name?: string } | undefined)?.name === 'NotFoundError';

const REGISTRY = Symbol.for('opencomms.opencode.instances');
const instances: Map<string, Instance> = ((globalThis as Record<symbol, unknown>)[REGISTRY] ??= new Map()) as Map<
  string,
  Instance
>;

export const OpenCommsPlugin = async (input: PluginInput) => {
  const key = normaliseWorktree(resolve(input.directory, '.opencomms'));
  let inst = instances.get(key);
  if (!inst) {
    inst = new Instance(input);
    instances.set(key, inst);
    const started = inst;
    // The host is not serving yet while plugins load: look sessions up once it is.
    setTimeout(
      () => void started.start().catch((e) => process.stderr.write(`[opencomms] start-up failed: ${describe(e)}\n`)),
      0,
    );
  }
  const it = inst;
  const tools: Record<string, unknown> = {};
  for (const def of toolsFor('opencode'))
    tools[def.name] = {
      description: def.description,
      args: def.shape,
      execute: async (args: Record<string, unknown>, ctx: { sessionID: string }) =>
        JSON.stringify(await it.call(def, args, ctx.sessionID)),
    };
  return {
    tool: tools,
    config: async (cfg: { command?: Record<string, unknown> }) => {
      cfg.command ??= {};
      cfg.command.OpenComms ??= {
        template: 'OpenComms $ARGUMENTS',
        description:
          'OpenComms: Create, Join, Status, Inbox, History, Pause, Resume, Disconnect, UpdateRole, Kick, Timer',
      };
    },
    'experimental.chat.system.transform': async (i: { sessionID?: string }, out: { system: string[] }) => {
      if (!i.sessionID) return;
      await it.markLocal(i.sessionID);
      const state = await it.runtime.peek().catch(() => null);
      if (state) out.system.push(...roleInstructions(state, i.sessionID));
    },
    event: async ({ event }: { event: HostEvent }) => {
      if (!event.type.startsWith('session.')) return;
      const p = event.properties ?? {};
      const sid = p.info?.id ?? p.sessionID;
      if (!sid) return;
      if (event.type === 'session.deleted') {
        await it.runtime.run({ op: 'mark_stale', session: sid });
        return;
      }
      await it.markLocal(sid);
      const st = event.type === 'session.idle' ? 'idle' : event.type === 'session.status' ? p.status?.type : undefined;
      if (st === 'idle') {
        it.setStatus(sid, 'idle');
        const state = await it.runtime.peek().catch(() => null);
        if (state && memberships(state, sid).some(({ m }) => m.stale))
          await it.runtime.run({ op: 'clear_stale', session: sid });
        it.runtime.wake(sid);
      } else if (st === 'busy' || st === 'retry') {
        // Busy without our prompt: a person started this turn, which ends a loop hold (OpenCode
        // has no hook to hand the held mail over at it; the wake at its end carries it).
        const ours = it.statusOf(sid) === 'busy';
        it.setStatus(sid, 'busy');
        if (!ours && st === 'busy') await it.personTurn(sid);
      }
    },
    'command.execute.before': async (
      i: { command: string; sessionID: string; arguments: string },
      out: { parts: Array<Record<string, unknown>> },
    ) => {
      if (i.command !== 'OpenComms') return;
      const parsed = parseSlash(i.arguments ?? '');
      const call = toToolCall(parsed);
      let text: string;
      if ('usage' in call) text = `OpenComms: ${call.usage}`;
      else {
        const def = toolsFor('opencode').find((t) => t.name === call.tool)!;
        const r = await it.call(def, call.args, i.sessionID);
        text = render(parsed.sub, r);
        if (
          !r.ok &&
          (r.data as { reason?: string }).reason === 'invalid_role' &&
          (parsed.sub === 'create' || parsed.sub === 'join')
        )
          text += `\n${usageFor(parsed.sub)}`;
      }
      // OpenCode 1.18 prompts with its own reference to this array (it never reads `out.parts`
      // back): replace the contents in place; assigning a new array would be ignored.
      const part = { ...(out.parts[0] ?? {}), type: 'text', text };
      out.parts.splice(0, out.parts.length, part);
    },
  };
};
