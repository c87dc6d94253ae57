import { PgStore } from '../../../src/store/postgres/store.ts';
import { dropProject, newProjectKey, testDatabaseUrl } from '../../helpers/postgres.ts';
import { storeContract } from './contract.ts';

storeContract('PgStore', async () => {
  const key = newProjectKey();
  return { open: async () => new PgStore({ url: testDatabaseUrl(), key }), cleanup: () => dropProject(key) };
});

storeContract('PgStore, a snapshot every 3 changes', async () => {
  const key = newProjectKey();
  return {
    open: async () => new PgStore({ url: testDatabaseUrl(), key, snapshotEvery: 3 }),
    cleanup: () => dropProject(key),
  };
});
