// normaliseWorktree (src/runtime/worktree.ts, FEATURES.md §6.5): every spelling of one directory —
// a trailing separator, `..` segments, a symlink, a relative path — becomes one string, the real
// path; on win32 the case folds too. The engine then compares worktrees as plain strings.
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normaliseWorktree } from '../../src/runtime/worktree.ts';

let root: string;
let dir: string;
beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'opencomms-worktree-')));
  dir = join(root, 'project');
  mkdirSync(join(dir, 'sub'), { recursive: true });
  mkdirSync(join(root, 'sibling'));
  symlinkSync(dir, join(root, 'link'));
  symlinkSync(root, join(root, 'root-link'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('normaliseWorktree', () => {
  it('maps every spelling of one directory to its real path', () => {
    const spellings = [
      dir,
      `${dir}${sep}`,
      `${dir}${sep}${sep}`,
      `${dir}${sep}sub${sep}..`,
      `${root}${sep}sibling${sep}..${sep}project`,
      `${dir}${sep}.${sep}sub${sep}..${sep}`,
      join(root, 'link'),
      `${join(root, 'link')}${sep}`,
      join(root, 'root-link', 'project'),
      relative(process.cwd(), dir),
      `${relative(process.cwd(), dir)}${sep}`,
    ];
    expect(new Set(spellings).size).toBe(spellings.length); // they really are different strings
    for (const s of spellings) expect(normaliseWorktree(s, 'linux'), s).toBe(dir);
  });

  it('keeps different directories apart, and a path that does not exist as its resolved spelling', () => {
    expect(normaliseWorktree(join(dir, 'sub'), 'linux')).toBe(join(dir, 'sub'));
    expect(normaliseWorktree(join(root, 'sibling'), 'linux')).not.toBe(normaliseWorktree(dir, 'linux'));
    const missing = join(root, 'not-yet', 'there');
    expect(normaliseWorktree(`${missing}${sep}`, 'linux')).toBe(missing);
    expect(normaliseWorktree(`${missing}${sep}..${sep}there`, 'linux')).toBe(missing);
    expect(normaliseWorktree(sep, 'linux')).toBe(sep); // the root keeps its only separator
  });

  it('folds case on win32 only: two case spellings are one worktree there and two elsewhere', () => {
    const upper = join(root, 'Case', 'Project');
    const lower = join(root, 'case', 'PROJECT');
    expect(normaliseWorktree(upper, 'win32')).toBe(normaliseWorktree(lower, 'win32'));
    expect(normaliseWorktree(upper, 'win32')).toBe(upper.toLowerCase());
    expect(normaliseWorktree(`${dir}${sep}`, 'win32')).toBe(dir.toLowerCase());
    for (const platform of ['linux', 'darwin'] as const)
      expect(normaliseWorktree(upper, platform)).not.toBe(normaliseWorktree(lower, platform));
    expect(normaliseWorktree(dirname(upper), 'linux')).toBe(join(root, 'Case'));
  });
});
