// A value as JSON text in pieces of about `size` characters, joined back by the server (a
// snapshot, schema.ts `compact`). The state's maps and their entries' arrays are written entry by
// entry (a queue holds thousands of ids), every other value whole (an envelope, a channel): one
// JSON.stringify per envelope, not one per field. No piece is much longer than `size` unless one
// such value is.
const OBJECT_DEPTH = 2;
const ARRAY_DEPTH = 3;

export function jsonPieces(value: unknown, size: number): string[] {
  const pieces: string[] = [];
  let cur = '';
  const put = (s: string) => {
    cur += s;
    if (cur.length >= size) {
      pieces.push(cur);
      cur = '';
    }
  };
  const write = (v: unknown, depth: number) => {
    if (
      v === null ||
      typeof v !== 'object' ||
      depth >= (Array.isArray(v) ? ARRAY_DEPTH : OBJECT_DEPTH) ||
      typeof (v as { toJSON?: unknown }).toJSON === 'function'
    )
      return put(JSON.stringify(v) ?? 'null');
    if (Array.isArray(v)) {
      put('[');
      for (let i = 0; i < v.length; i++) {
        if (i) put(',');
        // As JSON.stringify writes them: what has no JSON form is null inside an array.
        const x = v[i];
        write(x === undefined || typeof x === 'function' || typeof x === 'symbol' ? null : x, depth + 1);
      }
      return put(']');
    }
    put('{');
    let first = true;
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
      put(`${first ? '' : ','}${JSON.stringify(k)}:`);
      first = false;
      write(x, depth + 1);
    }
    put('}');
  };
  write(value, 0);
  if (cur) pieces.push(cur);
  return pieces;
}
