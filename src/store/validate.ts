// What a mutation wrote, checked before it is written (and what a journal entry wrote, checked as
// it is replayed): the structural rules of protocol.md "Loading (fail-closed)" and the schemas, applied to the
// entities and fields the operations touched, not to the whole state. A send touches a few
// fields of one channel and adds an envelope; checking those costs microseconds, where checking
// the channel whole cost a tenth of a send.
import { raw, type Op } from '../protocol/draft.ts';
import { ChannelSchema, EnvelopeSchema, ErrorEntrySchema, type State } from '../protocol/schema.ts';
import type * as z from 'zod';

type Obj = Record<string, unknown>;
type Shape = Record<string, z.ZodType>;

const ENTITIES: Record<string, { schema: z.ZodType; fields: Shape }> = {
  channels: { schema: ChannelSchema, fields: ChannelSchema.shape as Shape },
  messages: { schema: EnvelopeSchema, fields: EnvelopeSchema.shape as Shape },
};

const isIdList = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string');
const issue = (where: string, r: { error: { issues: Array<{ path: PropertyKey[]; message: string }> } }) => {
  const i = r.error.issues[0];
  return `${[where, ...(i?.path ?? []).map(String)].join('.')}: ${i?.message ?? 'invalid'}`;
};

/** Whether zod's output has a field (a default) that its input lacks, at any depth. */
function gainedDefaults(input: unknown, output: unknown): boolean {
  if (typeof output !== 'object' || output === null) return false;
  if (typeof input !== 'object' || input === null) return true;
  if (Array.isArray(output)) return output.some((o, i) => gainedDefaults((input as unknown[])[i], o));
  for (const [k, v] of Object.entries(output)) {
    if (!(k in input)) return true;
    if (typeof v === 'object' && v !== null && gainedDefaults((input as Obj)[k], v)) return true;
  }
  return false;
}

/** `delivered_total` (protocol.md "Loading (fail-closed)"), as a load computes it for a channel written without one. */
const handedOver = (state: State, channelId: string) =>
  Object.values(raw(state.messages)).filter(
    (e) => e.channel_id === channelId && (e.delivery_status === 'delivered' || e.delivery_status === 'in_flight'),
  ).length;

/** The first rule the written entities break, or null. With `backfill`, a whole entity written
 *  without a defaulted field gets it, in the state and in its operation: other processes replay
 *  the operation and must not see the field missing. Returns the operations as they are to be
 *  written. */
export function checkOps(state: State, ops: readonly Op[], backfill: boolean): { ops: Op[]; problem: string | null } {
  const s = raw(state) as unknown as Record<string, unknown>;
  const out: Op[] = [];
  /** Fields checked whole in this entry, by entity: a send writes several of one channel's. */
  const fieldsDone = new Map<Obj, string[]>();
  const fail = (problem: string) => ({ ops: out, problem });
  for (const op of ops) {
    const path = op[1];
    const [collection, key, field] = path;
    if (collection === 'schema_version') {
      if (s.schema_version !== 2) return fail('schema_version is not 2');
    } else if (collection === 'errors') {
      const items = op[0] === 'a' ? op[2] : (s.errors as unknown[]);
      if (!Array.isArray(items) || !items.every((e) => ErrorEntrySchema.safeParse(e).success))
        return fail('errors: an entry is malformed');
    } else if (collection === 'queues' || collection === 'delivered_to') {
      if (key === undefined) return fail(`${collection} cannot be written whole`);
      if (op[0] === 'a' ? !isIdList(op[2]) : op[0] === 's' && !isIdList((s[collection] as Obj)[key]))
        return fail(`${collection}.${key}: not a list of ids`);
    } else if (collection === 'channels' || collection === 'messages') {
      if (key === undefined) return fail(`${collection} cannot be written whole`);
      const all = s[collection] as Record<string, Obj>;
      const entity = all[key];
      const entry = path.length === 4 && op[0] !== 'a' ? entryOf(collection, field!) : null;
      const item = path.length === 3 && op[0] === 'a' ? itemOf(collection, field!) : null;
      if (entity === undefined) {
        if (path.length > 2) return fail(`${collection}.${key}: a field written on an entity that is gone`);
      } else if (path.length === 2) {
        const problem = checkEntity(state, collection, key, entity, backfill);
        if (problem) return fail(problem);
        if (backfill && all[key] !== entity) {
          out.push(['s', path, all[key]]);
          continue;
        }
      } else if (entry) {
        // One entry of a map field (a send's duplicate-window key): the entry, not the map.
        if (op[0] === 's') {
          const r = entry.safeParse(op[2]);
          if (!r.success) return fail(issue(path.join('.'), r));
        }
      } else if (item && op[0] === 'a') {
        // A send appends one id to a list of up to 128: only the appended ids are checked.
        for (const x of op[2]) {
          const r = item.safeParse(x);
          if (!r.success) return fail(issue(path.join('.'), r));
        }
      } else {
        const done = fieldsDone.get(entity);
        if (!done?.includes(field!)) {
          if (done) done.push(field!);
          else fieldsDone.set(entity, [field!]);
          const problem = checkField(collection, key, entity, field!);
          if (problem) return fail(problem);
        }
      }
    } else return fail(`${collection}: not part of the state`);
    out.push(op);
  }
  return { ops: out, problem: null };
}

function checkEntity(
  state: State,
  collection: 'channels' | 'messages',
  key: string,
  entity: Obj,
  backfill: boolean,
): string | null {
  const r = ENTITIES[collection]!.schema.safeParse(entity);
  if (!r.success) return issue(`${collection}.${key}`, r);
  const data = r.data as Obj;
  if (collection === 'channels') {
    const rule = channelRule(key, data);
    if (rule) return rule;
    if (data.delivered_total === undefined) data.delivered_total = handedOver(state, data.id as string);
  }
  if (backfill && gainedDefaults(entity, data)) (raw(state) as unknown as Record<string, Obj>)[collection]![key] = data;
  return null;
}

type Def = {
  type: string;
  innerType?: { _zod: { def: Def } };
  valueType?: z.ZodType;
  element?: z.ZodType;
  checks?: unknown[];
};
const defOf = (t: z.ZodType) => (t as unknown as { _zod: { def: Def } })._zod.def;

/** Unwrapped definitions of the schemas' own fields, by collection, then field: the schemas never
 *  change, and every written map entry and append asks. */
const innerDefs = { channels: new Map<string, Def>(), messages: new Map<string, Def>() };

/** A field's schema definition through its default/optional wrappers. */
function innerDef(collection: 'channels' | 'messages', field: string): Def | null {
  let def = innerDefs[collection].get(field);
  if (def) return def;
  const schema = ENTITIES[collection]!.fields[field];
  if (!schema) return null; // a field no schema names (written by a peer, maybe): not cached
  def = defOf(schema);
  while (def.innerType) def = def.innerType._zod.def;
  innerDefs[collection].set(field, def);
  return def;
}

/** The schema of one entry of a map (record) field. */
function entryOf(collection: 'channels' | 'messages', field: string): z.ZodType | null {
  const def = innerDef(collection, field);
  return def?.type === 'record' && def.valueType ? def.valueType : null;
}

/** The schema of one item of a list field that bounds nothing about the list as a whole (no
 *  length check): an append to it is checked by its new items, the list before it being valid. */
function itemOf(collection: 'channels' | 'messages', field: string): z.ZodType | null {
  const def = innerDef(collection, field);
  return def?.type === 'array' && def.element && !def.checks?.length ? def.element : null;
}

/** One field of an entity against its schema; the rules that span fields when one of theirs changed. */
function checkField(collection: 'channels' | 'messages', key: string, entity: Obj, field: string): string | null {
  const schema = ENTITIES[collection]!.fields[field];
  if (schema) {
    const r = schema.safeParse(entity[field]);
    if (!r.success) return issue(`${collection}.${key}.${field}`, r);
  }
  if (collection === 'channels' && (field === 'name' || field === 'lifecycle' || field === 'members'))
    return channelRule(key, entity);
  return null;
}

/** Rules of protocol.md "Loading (fail-closed)" a channel's schema cannot state: the key is its name; a tombstone has no members. */
function channelRule(key: string, ch: Obj): string | null {
  if (ch.name !== key) return `channels.${key}: key does not equal name "${String(ch.name)}"`;
  if (ch.lifecycle !== 'active' && Array.isArray(ch.members) && ch.members.length > 0)
    return `channels.${key}: a ${String(ch.lifecycle)} channel has members`;
  return null;
}
