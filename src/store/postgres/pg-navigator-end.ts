// Evaluated just after `pg` (pg.ts): the `navigator` lent for its load goes again.
import { lent } from './pg-navigator.ts';

if (lent) delete (globalThis as { navigator?: unknown }).navigator;
