// Public surface of the stores: the interface, each store, and the file store's own helpers.
export { FileStore, durabilityFromEnv, inspectState } from './file/store.ts';
export type { Durability, FileStoreOptions, Inspection } from './file/store.ts';
export { MemoryStore } from './memory.ts';
export { openStore, readBinding, writeBinding } from './binding.ts';
export type { Binding } from './binding.ts';
export { PgStore } from './postgres/store.ts';
export type { InvalidFile, MutateOutcome, Store, Subscription, StoreChange } from './types.ts';
export { ensureDir, resolvePaths, LEGACY_DIR, LEGACY_HOST, STORE_DIR } from './paths.ts';
export type { StorePaths } from './paths.ts';
export { TEMP_NAME_RE, writeAtomic } from './file/atomic.ts';
export type { WriteAtomicOptions } from './file/atomic.ts';
export { stateBusy, withLock } from './file/lock.ts';
export { DAMAGE_REASONS } from './file/damage.ts';
export type { HeldLock, LockOptions } from './file/lock.ts';
export { classify, readStateFile, storeStats } from './file/state-file.ts';
export { loadLockFree, loadLocked } from './file/load.ts';
export type { Snapshot } from './file/load.ts';
export { convertV1, isPlaceholder, migrateV1, migrationPending, V1_ROLE_PROMPT } from './file/migrate.ts';
export { appendHistory, deleteHistory, findInHistory, historyIds, readHistory } from './file/history-log.ts';
export {
  ArchiveSchema,
  deleteArchive,
  findArchiveByName,
  listArchives,
  readArchive,
  writeArchive,
} from './file/archives.ts';
export type { Archive, ArchiveInput } from './file/archives.ts';
export { PinSchema, listPins, readPin, writePin } from './pins.ts';
export type { Pin, PinListing } from './pins.ts';
