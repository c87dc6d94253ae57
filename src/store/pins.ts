// Member pins, `pins/<member_id>.json` (protocol.md "State files", "Result shape"), and the read-only legacy
// `member-pin.json`. Ids are checked against MEMBER_ID_RE before any path is built from one.
import { mkdir, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as z from 'zod';
import { HOST_LABEL_RE, MEMBER_ID_RE, isMemberId } from '../protocol/ids.ts';
import { RefusalError, refuse } from '../protocol/result.ts';
import { writeAtomic } from './file/atomic.ts';
import type { InvalidFile } from './types.ts';
import type { StorePaths } from './paths.ts';

export const PinSchema = z.object({
  member_id: z.string().regex(MEMBER_ID_RE),
  host: z.string().regex(HOST_LABEL_RE),
  saved_at: z.number(),
});
export type Pin = z.infer<typeof PinSchema>;

type PinPaths = Pick<StorePaths, 'pins' | 'legacyPin'>;

const pinFile = (paths: PinPaths, id: string) => join(paths.pins, `${id}.json`);

export async function writePin(
  paths: PinPaths,
  pin: { member_id: string; host: string },
  now = Date.now(),
): Promise<Pin> {
  if (!isMemberId(pin.member_id))
    throw new RefusalError(refuse('invalid_member_id', `Member id must match ${MEMBER_ID_RE}; nothing was written.`));
  if (!HOST_LABEL_RE.test(pin.host))
    throw new RefusalError(refuse('invalid_argument', `Host label must match ${HOST_LABEL_RE}; nothing was written.`));
  const saved: Pin = { member_id: pin.member_id, host: pin.host, saved_at: now };
  await mkdir(paths.pins, { recursive: true });
  await writeAtomic(pinFile(paths, saved.member_id), `${JSON.stringify(saved, null, 2)}\n`, {
    tmpPrefix: '.pin',
    durable: true,
  });
  return saved;
}

async function parsePinFile(file: string): Promise<{ ok: true; pin: Pin } | { ok: false; cause: string }> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (e) {
    return { ok: false, cause: (e as NodeJS.ErrnoException).code ?? 'not valid JSON' };
  }
  const r = PinSchema.safeParse(raw);
  return r.success ? { ok: true, pin: r.data } : { ok: false, cause: 'not a {member_id, host, saved_at} pin' };
}

/** A pin is honoured only if its file name equals its member_id: a copied or renamed file must
 *  not let one member act as another. */
export async function readPin(paths: PinPaths, id: string): Promise<Pin | null> {
  if (!isMemberId(id)) return null;
  const r = await parsePinFile(pinFile(paths, id));
  return r.ok && r.pin.member_id === id ? r.pin : null;
}

export interface PinListing {
  pins: Pin[];
  invalid: InvalidFile[];
  /** true when `pins` came from the legacy member-pin.json (pins/ held no valid pin). */
  legacy: boolean;
}

export async function listPins(paths: PinPaths): Promise<PinListing> {
  let names: string[] = [];
  try {
    names = await readdir(paths.pins);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const pins: Pin[] = [];
  const invalid: InvalidFile[] = [];
  for (const file of names.filter((n) => n.endsWith('.json')).sort()) {
    const id = file.slice(0, -'.json'.length);
    if (!isMemberId(id)) {
      invalid.push({ file, cause: 'file name is not a member id' });
      continue;
    }
    const r = await parsePinFile(join(paths.pins, file));
    if (!r.ok) invalid.push({ file, cause: r.cause });
    else if (r.pin.member_id !== id)
      invalid.push({ file, cause: `member_id ${r.pin.member_id} does not match the file name` });
    else pins.push(r.pin);
  }
  if (pins.length > 0) return { pins, invalid, legacy: false };
  const legacy = await parsePinFile(paths.legacyPin);
  return legacy.ok ? { pins: [legacy.pin], invalid, legacy: true } : { pins, invalid, legacy: false };
}
