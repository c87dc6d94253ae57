import { MemoryStore } from '../../../src/store/memory.ts';
import { storeContract } from './contract.ts';

storeContract('MemoryStore', async () => {
  const first = new MemoryStore();
  let opened = 0;
  return { open: async () => (opened++ === 0 ? first : first.sibling()), cleanup: async () => {} };
});
