// spawn_push with the real CLIs (FEATURES.md §8.4): a session made by an earlier real run is resumed
// by OpenComms itself — `claude --resume <session> --print <batch>` and `codex exec resume <thread>
// <batch>` — when a peer sends through MCP. The spawning process is the peer's own `opencomms mcp`;
// its OPENCOMMS_*_BIN template runs the client offline (test/real/fixtures/netns-wrap.mjs). The
// fake model must receive the framed batch inside the resumed conversation.
import { describe, expect, it } from 'vitest';
import { useCleanups } from './cleanups.ts';
import { spawnRig } from './claude-harness.ts';

const { defer, sandbox } = useCleanups();

describe('spawn_push resumes sessions of earlier real runs', () => {
  for (const [host, how] of [
    ['claude-code', 'claude --resume <session> --print <batch>'],
    ['codex', 'codex exec resume <thread> <batch>'],
  ] as const)
    it(`${how}: the fake receives the framed batch in the resumed conversation, committed as spawn_push`, async () => {
      const rig = await spawnRig(sandbox(`oc-spawn-${host}`), defer, host, 4);
      const { req, ms } = await rig.deliver('resume and review this');
      expect(
        req.userTexts.some((t) => t.includes('EARLIER-RUN hello')),
        'the earlier conversation is resumed',
      ).toBe(true);
      expect(req.userTexts.join('\n')).toContain(
        '<<<UNTRUSTED_PEER_MESSAGE>>>\nresume and review this\n<<<END_UNTRUSTED_PEER_MESSAGE>>>',
      );
      console.log(`[spawn] ${host}: send → model request ${ms} ms`);
    }, 150_000);
});
