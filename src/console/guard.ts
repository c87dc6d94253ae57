// The console's protections (operator.md "The console"), as pure checks on a request's method and headers:
// a Host header that is not loopback (DNS rebinding) and a cross-site write (CSRF) are refused.

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Sec-Fetch-Site values a browser sends for a request the page itself made, or the user typed. */
const SAME_SITE_FETCH = new Set(['same-origin', 'none']);

/** `host[:port]` → host, keeping IPv6 brackets. */
function hostOnly(value: string): string {
  const v = value.trim().toLowerCase();
  if (v.startsWith('[')) return v.slice(0, v.indexOf(']') + 1);
  const colon = v.indexOf(':');
  return colon === -1 ? v : v.slice(0, colon);
}

export const isLoopbackHost = (hostHeader: string | undefined): boolean =>
  hostHeader !== undefined && LOOPBACK_HOSTS.has(hostOnly(hostHeader));

function isLoopbackOrigin(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && LOOPBACK_HOSTS.has(u.hostname);
  } catch {
    return false; // `null`, garbage
  }
}

export interface RequestHead {
  method: string;
  hostHeader?: string;
  origin?: string;
  referer?: string;
  secFetchSite?: string;
}

/** Why the request is refused with 403, or null. Any port is accepted: the check is about names. */
export function forbidden(r: RequestHead): string | null {
  if (!isLoopbackHost(r.hostHeader))
    return `Host header ${JSON.stringify(r.hostHeader ?? '')} is not 127.0.0.1, localhost or [::1]`;
  if (!MUTATING.has(r.method)) return null;
  if (r.secFetchSite !== undefined && SAME_SITE_FETCH.has(r.secFetchSite)) return null;
  if (r.origin !== undefined)
    return isLoopbackOrigin(r.origin) ? null : `cross-site ${r.method} from origin ${JSON.stringify(r.origin)}`;
  if (r.referer !== undefined)
    return isLoopbackOrigin(r.referer) ? null : `cross-site ${r.method} from referer ${JSON.stringify(r.referer)}`;
  if (r.secFetchSite !== undefined) return `cross-site ${r.method} (Sec-Fetch-Site: ${r.secFetchSite})`;
  return null; // no browser headers at all: a local tool (curl, a script) on the same machine
}

/** Binds the CLI accepts (`--bind`): loopback only. */
export const LOOPBACK_BINDS = ['127.0.0.1', 'localhost', '::1'] as const;
