// The `pg` client as the store loads it: with a `navigator` lent for its load (pg-navigator.ts), so
// that it does not load Node's fetch implementation. The imports evaluate in this order.
import './pg-navigator.ts';
import pg from 'pg';
import './pg-navigator-end.ts';

export default pg;
