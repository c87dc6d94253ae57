// spawn_push with the hosts' own hooks installed (`opencomms install claude-code` / `install codex`,
// the set-up the README gives): each spawned `claude --resume … --print <batch>` / `codex exec resume
// … <batch>` runs OpenComms' SessionStart, UserPromptSubmit, Stop (and Claude's SessionEnd) hooks
// itself. Three bursts in a row: the model reads every message once, oldest first, the role block
// once, and the member is never marked stale by a spawned run's end.
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { frameIds, spawnRig, until } from './claude-harness.ts';
import type { ModelRequest } from './fake/index.ts';

const { defer, sandbox } = useCleanups();

/** Every text the model reads in a request, in order: Anthropic user and system messages (tool
 *  results included; Claude Code puts a hook's context in a system message for some models),
 *  or the Responses input's user and developer texts (where Codex puts hook context). */
function texts(req: ModelRequest): string[] {
  const of = (c: unknown): string[] =>
    typeof c === 'string'
      ? [c]
      : Array.isArray(c)
        ? c.flatMap((b: any) =>
            typeof b?.text === 'string' ? [b.text] : b?.type === 'tool_result' ? of(b.content) : [],
          )
        : [];
  if (req.api === 'anthropic')
    return (req.body.messages as any[])
      .filter((m) => m.role === 'user' || m.role === 'system')
      .flatMap((m) => of(m.content));
  return (req.body.input as any[])
    .filter((i) => i.role === 'user' || i.role === 'developer')
    .flatMap((i) => of(i.content));
}

describe("spawn_push with the hosts' hooks installed", () => {
  for (const host of ['claude-code', 'codex'] as const)
    it(`${host}: three bursts, each message read once and oldest first, the role block once, never stale`, async () => {
      const rig = await spawnRig(sandbox(`oc-spawn-hooks-${host}`), defer, host, 40, { hooks: true });
      const ids: string[] = [];
      for (const burst of [1, 2, 3]) {
        for (let i = 1; i <= 3; i++) ids.push((await rig.peer.send(`B${burst}-${i}`)).id); // peer.send asserts ok: never recipient_stale
        await until(
          `burst ${burst} committed as spawn_push, none of it taken by the spawned runs' own hooks (push)`,
          async () => {
            for (const id of ids) if (!(await rig.committed(id))) return false;
            return true;
          },
          90_000,
          () => rig.peer.stderr.join('').slice(-3000),
        );
        const row = (await rig.rt.read()).channels.team!.members.find((m) => m.session_id === rig.member)!;
        expect(row.stale, `after burst ${burst}`).toBe(false);
      }
      const turns = rig.fake.turns();
      // Every request reads each frame at most once, in the order sent.
      for (const req of turns) {
        const read = texts(req).flatMap(frameIds);
        expect(read, 'a request reads a frame twice').toEqual([...new Set(read)]);
        expect(read, 'oldest first').toEqual(ids.filter((id) => read.includes(id)));
      }
      // Every message reached the model; the resumed conversation reads them all, in order.
      const last = texts(turns.at(-1)!).flatMap(frameIds);
      expect(ids.every((id) => turns.some((r) => texts(r).flatMap(frameIds).includes(id)))).toBe(true);
      console.log(
        `[spawn-hooks] ${host}: ${turns.length} requests; the last reads ${last.length} of ${ids.length} frames`,
      );
      const roleBlocks = (req: ModelRequest) =>
        texts(req).join('\n').split('## OpenComms role instructions').length - 1;
      for (const req of turns) expect(roleBlocks(req), 'the role block at most once').toBeLessThanOrEqual(1);
      expect(roleBlocks(turns.at(-1)!), 'the resumed session holds its role block').toBe(1);
      for (const id of ids) expect(await rig.committed(id), id).toMatchObject({ attempts: 1 });
    }, 400_000);
});
