// A request whose params break its method's schema is -32602 with a one-line reason (FEATURES.md
// §7.3), never the SDK's -32603 with a dump of the zod issues. Found by the frame fuzz.
import { describe, expect, it } from 'vitest';
import { invalidParams } from '../../adapters/mcp/params.ts';

const req = (method: string, params?: unknown) =>
  ({ jsonrpc: '2.0' as const, id: 7, method, ...(params === undefined ? {} : { params }) }) as never;

describe('invalid params of handled methods', () => {
  it.each([
    ['tools/call', { name: 'opencomms_status', arguments: [] }, 'params.arguments'],
    ['tools/call', { name: 5, arguments: {} }, 'params.name'],
    ['tools/call', undefined, 'params'],
    ['tools/list', { cursor: 5 }, 'params.cursor'],
    ['initialize', {}, 'params.protocolVersion'],
  ])('%s %j → -32602 naming %s', (method, params, path) => {
    const r = invalidParams(req(method, params)) as { id: number; error: { code: number; message: string } };
    expect(r.id).toBe(7);
    expect(r.error.code).toBe(-32602);
    expect(r.error.message).toMatch(new RegExp(`^Invalid params for ${method}: ${path.replace('.', '\\.')}: `));
    expect(r.error.message).not.toContain('\n');
  });

  it('valid params, other methods, notifications and responses are left to the SDK', () => {
    expect(invalidParams(req('tools/call', { name: 'x', arguments: { a: 1 } }))).toBeNull();
    expect(invalidParams(req('ping'))).toBeNull();
    expect(invalidParams(req('resources/list', 5))).toBeNull();
    expect(invalidParams({ jsonrpc: '2.0', method: 'notifications/cancelled', params: 5 } as never)).toBeNull();
    expect(invalidParams({ jsonrpc: '2.0', id: 1, result: {} })).toBeNull();
  });
});
