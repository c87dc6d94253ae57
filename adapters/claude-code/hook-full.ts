// The hook runner's full path, a bundle of its own (`.opencomms/claude-code-hooks-full.mjs`): the
// runner imports it only when a hook has work, so the common case never parses the store, the
// schemas or the machines.
export { confirmWoken, handleHook } from './hook-events.ts';
export { runWaiter } from './wake.ts';
