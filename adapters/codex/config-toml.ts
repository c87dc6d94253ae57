// `.codex/config.toml` edits with TOML libraries, never by pattern: toml-eslint-parser parses the
// file (a malformed one is refused) and gives the source range of every table and key, so our
// section is cut out exactly; smol-toml writes the section we add. The user's own text, comments
// and layout are never re-serialised: an install appends, an uninstall removes what it appended.
import { stringify } from 'smol-toml';
import { getStaticTOMLValue, parseTOML } from 'toml-eslint-parser';
import type { AST } from 'toml-eslint-parser';
import { isObject, type JsonObject } from '../install/json.ts';

export const SERVER_KEY = ['mcp_servers', 'opencomms'] as const;

/** The parsed document and its plain value, or null when the text is not valid TOML. */
export function parseToml(text: string): { ast: AST.TOMLProgram; value: JsonObject } | null {
  try {
    const ast = parseTOML(text);
    return { ast, value: getStaticTOMLValue(ast) as JsonObject };
  } catch {
    return null;
  }
}

/** Why the document cannot take our server entry, or null. */
export function serversShapeError(value: JsonObject): string | null {
  const servers = value.mcp_servers;
  if (servers !== undefined && !isObject(servers)) return '"mcp_servers" must be a table';
  return null;
}

const eolOf = (text: string) => (text.includes('\r\n') ? '\r\n' : '\n');

/** The keys of our server entry that OpenComms writes. Any other key in it is the user's (or
 *  Codex's on the user's behalf): `tools.<tool>.approval_mode = "approve"`, which Codex 0.171.0
 *  writes when the user answers "Allow and don't ask me again", `default_tools_approval_mode`,
 *  timeouts. An install compares and rewrites only these. */
export const OWN_KEYS: readonly string[] = ['command', 'args', 'cwd', 'required', 'env_vars', 'env'];

/** The part of an entry that OpenComms owns (the entry itself when it is not a table). */
export const ownPart = (entry: unknown): unknown =>
  isObject(entry) ? Object.fromEntries(Object.entries(entry).filter(([k]) => OWN_KEYS.includes(k))) : entry;

/** `text` with `[mcp_servers.opencomms]` (and its `.env` sub-table) appended after a blank line, in
 *  the file's line ending; a file without a final newline gets none after our section either, so
 *  removing the section gives the file back byte for byte. `userLines` (the user's own key lines of
 *  an entry being rewritten, each with its line ending) go into the new table after our keys. */
export function appendServer(text: string, server: JsonObject, userLines: readonly string[] = []): string {
  const eol = eolOf(text);
  const lines = stringify({ [SERVER_KEY[0]]: { [SERVER_KEY[1]]: server } })
    .replace(/\n+$/, '')
    .split('\n');
  if (userLines.length) {
    const end = lines.indexOf('');
    const own = userLines.map((l) => l.replace(/\r?\n$/, ''));
    lines.splice(end < 0 ? lines.length : end, 0, ...own);
  }
  const section = lines.join(eol);
  if (!text) return `${section}${eol}`;
  return text.endsWith('\n') ? `${text}${eol}${section}${eol}` : `${text}${eol}${eol}${section}`;
}

const isOurs = (key: readonly (string | number)[]) => key[0] === SERVER_KEY[0] && key[1] === SERVER_KEY[1];

/** Source ranges of our server, whichever TOML form holds it: its tables (each up to the next
 *  top-level item), or a key under `[mcp_servers]` / a dotted top-level key (to its line end).
 *  `ownOnly`: only what OpenComms writes, i.e. the `[mcp_servers.opencomms]` table and its `.env`;
 *  the user's sub-tables (`.tools.<tool>`, …) are left out. */
function ourRanges(text: string, ast: AST.TOMLProgram, ownOnly = false): Array<[number, number]> {
  const top = ast.body[0];
  const items = top.body;
  const ranges: Array<[number, number]> = [];
  items.forEach((item, i) => {
    const next = i + 1 < items.length ? items[i + 1]!.range[0] : text.length;
    if (item.type === 'TOMLTable') {
      if (isOurs(item.resolvedKey)) {
        const own = item.resolvedKey.length === 2 || (item.resolvedKey.length === 3 && item.resolvedKey[2] === 'env');
        if (own || !ownOnly) ranges.push([item.range[0], next]);
      } else if (item.resolvedKey.length === 1 && item.resolvedKey[0] === SERVER_KEY[0])
        for (const kv of item.body)
          if (kv.key.keys[0] && keyName(kv.key.keys[0]) === SERVER_KEY[1])
            ranges.push([kv.range[0], lineEnd(text, kv.range[1])]);
    } else if (item.key.keys.length >= 2 && isOurs(item.key.keys.map(keyName)))
      ranges.push([item.range[0], lineEnd(text, item.range[1])]);
  });
  return ranges;
}

const lineEnd = (text: string, at: number) => {
  const nl = text.indexOf('\n', at);
  return nl < 0 ? text.length : nl + 1;
};

/** The user's own key lines in our `[mcp_servers.opencomms]` table (keys OpenComms does not write),
 *  each as written, with its trailing comment and line ending. */
export function userKeyLines(text: string, ast: AST.TOMLProgram): string[] {
  const lines: string[] = [];
  for (const item of ast.body[0].body)
    if (item.type === 'TOMLTable' && isOurs(item.resolvedKey) && item.resolvedKey.length === 2)
      for (const kv of item.body) {
        const first = kv.key.keys[0];
        if (first && !OWN_KEYS.includes(keyName(first)))
          lines.push(text.slice(kv.range[0], lineEnd(text, kv.range[1])));
      }
  return lines;
}

const keyName = (k: AST.TOMLKey['keys'][number]) => (k.type === 'TOMLBare' ? k.name : k.value);

/** `text` without our server: the exact inverse of `appendServer` when the section is the last
 *  thing in the file (the blank line before it goes too, and a final newline only if it had one).
 *  `ownOnly` (a rewrite of our entry): the user's sub-tables of it stay where they stand. */
export function removeServer(text: string, ast: AST.TOMLProgram, ownOnly = false): string {
  const eol = eolOf(text);
  const ranges = ourRanges(text, ast, ownOnly).sort((a, b) => b[0] - a[0]);
  const last = ranges.find(([, to]) => to >= text.length);
  let out = text;
  for (const [from, to] of ranges) out = out.slice(0, from) + out.slice(to);
  if (last && out.length) {
    // appendServer put one line ending before the section after a final newline, two without one.
    const hadFinal = text.slice(last[0], last[1]).endsWith('\n');
    if (out.endsWith(eol + eol)) out = out.slice(0, -(hadFinal ? eol : eol + eol).length);
  }
  return out;
}

/** Our server entry's value, when the file has one. */
export const serverOf = (value: JsonObject): unknown =>
  isObject(value.mcp_servers) ? value.mcp_servers[SERVER_KEY[1]] : undefined;

/** The source range of `[mcp_servers.opencomms.env] <key>` when it still holds `placeholder`. */
export function placeholderRange(ast: AST.TOMLProgram, placeholder: string, key: string): [number, number] | null {
  for (const item of ast.body[0].body) {
    if (item.type !== 'TOMLTable' || !isOurs(item.resolvedKey) || item.resolvedKey[2] !== 'env') continue;
    for (const kv of item.body)
      if (
        kv.key.keys.length === 1 &&
        keyName(kv.key.keys[0]!) === key &&
        kv.value.type === 'TOMLValue' &&
        kv.value.value === placeholder
      )
        return kv.value.range;
  }
  return null;
}

/** A TOML basic string holding `s`, as the TOML writer spells it. */
export const tomlString = (s: string) => stringify({ v: s }).slice('v = '.length).trimEnd();
