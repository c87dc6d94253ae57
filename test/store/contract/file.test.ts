import { FileStore } from '../../../src/store/file/store.ts';
import { tempProject } from '../../helpers/store-fixtures.ts';
import { storeContract } from './contract.ts';

storeContract('FileStore', async () => {
  const { dir, cleanup } = await tempProject();
  return { open: async () => new FileStore(dir), cleanup };
});
