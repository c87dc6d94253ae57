// Per-test cleanups of the real-client tests: run after each test, newest first; a failing one
// is logged and the rest still run.
import { afterEach } from 'vitest';
import { makeSandbox, type Sandbox } from './env.ts';

export function useCleanups() {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        await c();
      } catch (e) {
        console.error('cleanup:', e);
      }
    }
  });
  /** Registers `close(value)` to run after the test and returns `value`. */
  const defer = <T>(value: T, close: (v: T) => unknown): T => {
    cleanups.push(() => close(value));
    return value;
  };
  return {
    defer,
    sandbox: (name: string): Sandbox => defer(makeSandbox(name), (sb) => sb.cleanup()),
  };
}
