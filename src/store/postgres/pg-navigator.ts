// Evaluated just before `pg` (pg.ts): pg asks at load whether it runs in a Cloudflare Worker, and
// on a Node without `navigator` (20) it builds a fetch `Response` to find out, which loads Node's
// fetch implementation (~12 MB of RSS and start-up time in every process) for nothing. A
// `navigator` that answers "not a Worker" stands there while pg loads; pg-navigator-end.ts removes it.
const g = globalThis as { navigator?: unknown };
export const lent = g.navigator === undefined;
if (lent) g.navigator = { userAgent: 'Node.js' };
