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

/** `text` with `[mcp_servers.opencomms]` (and its `.env` sub-table) appended after a blank line, in
 *  the file's line ending; a file without a final newline gets none after our section either, so
 *  removing the section gives the file back byte for byte. */
export function appendServer(text: string, server: JsonObject): string {
  const eol = eolOf(text);
  const section = stringify({ [SERVER_KEY[0]]: { [SERVER_KEY[1]]: server } })
    .replace(/\n+$/, '')
    .split('\n')
    .join(eol);
  if (!text) return `${section}${eol}`;
  return text.endsWith('\n') ? `${text}${eol}${section}${eol}` : `${text}${eol}${eol}${section}`;
}

const isOurs = (key: readonly (string | number)[]) => key[0] === SERVER_KEY[0] && key[1] === SERVER_KEY[1];

/** Source ranges of our server, whichever TOML form holds it: its tables (each up to the next
 *  top-level item), or a key under `[mcp_servers]` / a dotted top-level key (to its line end). */
function ourRanges(text: string, ast: AST.TOMLProgram): Array<[number, number]> {
  const top = ast.body[0];
  const items = top.body;
  const ranges: Array<[number, number]> = [];
  const lineEnd = (at: number) => {
    const nl = text.indexOf('\n', at);
    return nl < 0 ? text.length : nl + 1;
  };
  items.forEach((item, i) => {
    const next = i + 1 < items.length ? items[i + 1]!.range[0] : text.length;
    if (item.type === 'TOMLTable') {
      if (isOurs(item.resolvedKey)) ranges.push([item.range[0], next]);
      else if (item.resolvedKey.length === 1 && item.resolvedKey[0] === SERVER_KEY[0])
        for (const kv of item.body)
          if (kv.key.keys[0] && keyName(kv.key.keys[0]) === SERVER_KEY[1])
            ranges.push([kv.range[0], lineEnd(kv.range[1])]);
    } else if (item.key.keys.length >= 2 && isOurs(item.key.keys.map(keyName)))
      ranges.push([item.range[0], lineEnd(item.range[1])]);
  });
  return ranges;
}

const keyName = (k: AST.TOMLKey['keys'][number]) => (k.type === 'TOMLBare' ? k.name : k.value);

/** `text` without our server: the exact inverse of `appendServer` when the section is the last
 *  thing in the file (the blank line before it goes too, and a final newline only if it had one). */
export function removeServer(text: string, ast: AST.TOMLProgram): string {
  const eol = eolOf(text);
  const ranges = ourRanges(text, ast).sort((a, b) => b[0] - a[0]);
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
