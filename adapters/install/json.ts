// JSON(C) config edits for the installers. jsonc-parser parses (strictly enough to refuse a
// malformed file) and locates every node; each edit replaces exactly one span and leaves every
// other byte alone (its own formatter would re-indent neighbouring entries). What an install
// appends at the end of a container, an uninstall removes exactly, so the file comes back byte for
// byte. Inserted JSON follows the file's own indentation and line ending.
import { findNodeAtLocation, parse, parseTree, type JSONPath, type Node, type ParseError } from 'jsonc-parser';

export type JsonObject = Record<string, unknown>;

export const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The object in `text`, or null when it is not a JSON(C) object (comments and trailing commas are allowed). */
export function parseObject(text: string): JsonObject | null {
  const errors: ParseError[] = [];
  const v: unknown = parse(text, errors, { allowTrailingComma: true, disallowComments: false });
  return errors.length === 0 && isObject(v) ? v : null;
}

/** A new file holding `value`, formatted like the installers' other output. */
export const newJsonFile = (value: JsonObject): string => `${JSON.stringify(value, null, 2)}\n`;

const eolOf = (text: string) => (text.includes('\r\n') ? '\r\n' : '\n');
/** One indentation step as the file uses it (the first indented line), two spaces by default. */
const unitOf = (text: string) => /^([ \t]+)\S/m.exec(text)?.[1] ?? '  ';
/** The leading white space of the line holding `offset`. */
const indentAt = (text: string, offset: number) =>
  /^[ \t]*/.exec(text.slice(text.lastIndexOf('\n', offset - 1) + 1))![0];

function pretty(text: string, value: unknown, indent: string): string {
  const unit = unitOf(text);
  return JSON.stringify(value, null, unit.startsWith('\t') ? '\t' : unit.length)
    .split('\n')
    .join(eolOf(text) + indent);
}

function nodeAt(text: string, path: JSONPath): Node {
  const root = parseTree(text, [], { allowTrailingComma: true });
  const node = root && (path.length ? findNodeAtLocation(root, path) : root);
  if (!node) throw new Error(`no JSON value at ${JSON.stringify(path)}`);
  return node;
}

const splice = (text: string, from: number, to: number, insert: string) =>
  text.slice(0, from) + insert + text.slice(to);

/** Appends `key: value` as the last member of the object at `path`, or `value` as the last element
 *  of the array at `path` (`key` undefined). */
export function append(text: string, path: JSONPath, value: unknown, key?: string): string {
  const container = nodeAt(text, path);
  const eol = eolOf(text);
  const item = (indent: string) => (key === undefined ? '' : `${JSON.stringify(key)}: `) + pretty(text, value, indent);
  const last = container.children?.at(-1);
  if (last) {
    const indent = indentAt(text, last.offset);
    return splice(text, last.offset + last.length, last.offset + last.length, `,${eol}${indent}${item(indent)}`);
  }
  const outer = indentAt(text, container.offset);
  const indent = outer + unitOf(text);
  const inner = text.slice(container.offset + 1, container.offset + container.length - 1);
  // Only white space inside: ours replaces it. A comment inside stays, after our entry.
  if (inner.trim() === '')
    return splice(
      text,
      container.offset + 1,
      container.offset + container.length - 1,
      `${eol}${indent}${item(indent)}${eol}${outer}`,
    );
  return splice(text, container.offset + 1, container.offset + 1, `${eol}${indent}${item(indent)}`);
}

/** Replaces the value at `path`. */
export function replace(text: string, path: JSONPath, value: unknown): string {
  const node = nodeAt(text, path);
  return splice(text, node.offset, node.offset + node.length, pretty(text, value, indentAt(text, node.offset)));
}

/** Removes the member or element at `path` with the separator before it (or after it, when it is
 *  first): the exact inverse of `append`. */
export function remove(text: string, path: JSONPath): string {
  const value = nodeAt(text, path);
  const item = value.parent?.type === 'property' ? value.parent : value;
  const siblings = item.parent!.children!;
  const i = siblings.indexOf(item);
  const end = item.offset + item.length;
  if (i > 0) return splice(text, siblings[i - 1]!.offset + siblings[i - 1]!.length, end, '');
  if (siblings.length > 1) return splice(text, item.offset, siblings[1]!.offset, '');
  const c = item.parent!;
  const close = c.offset + c.length - 1;
  const after = text.slice(end, close);
  return splice(text, c.offset + 1, after.trim() === '' ? close : end, '');
}
