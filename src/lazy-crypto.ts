// node:crypto, loaded at its first use rather than with the module that uses it: the hook runner's
// entry imports ids, journals, the machine id and the PostgreSQL wire client, and answers an empty
// queue without their randomness or hashes; loading crypto would cost every prompt (docs/hosts.md
// "The hook runner"; test/adapters/claude-code/hooks.test.ts checks the modules it loads).
export const crypto = (): typeof import('node:crypto') => process.getBuiltinModule('node:crypto');
