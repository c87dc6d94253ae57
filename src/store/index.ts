// Public surface of the state-file store.
export { FileStore, durabilityFromEnv, inspectState } from './store.ts';
export type { Durability, FileStoreOptions, Inspection } from './store.ts';
export { MemoryStore } from './memory.ts';
export { openStore, readBinding, writeBinding } from './binding.ts';
export type { Binding } from './binding.ts';
export { PgStore } from './postgres/store.ts';
export type { MutateOutcome, Store, Watch, WatchChange } from './types.ts';
export { ensureDir, resolvePaths, LEGACY_DIR, LEGACY_HOST, STORE_DIR } from './paths.ts';
export type { StorePaths } from './paths.ts';
export { TEMP_NAME_RE, writeAtomic } from './atomic.ts';
export type { WriteAtomicOptions } from './atomic.ts';
export { stateBusy, withLock } from './lock.ts';
export { DAMAGE_REASONS } from './damage.ts';
export type { HeldLock, LockOptions } from './lock.ts';
export { classify, readStateFile, storeStats } from './state-file.ts';
export { loadLockFree, loadLocked } from './load.ts';
export type { Snapshot } from './load.ts';
export { convertV1, isPlaceholder, migrateV1, migrationPending, V1_ROLE_PROMPT } from './migrate.ts';
export { appendHistory, deleteHistory, findInHistory, historyIds, readHistory } from './history-log.ts';
export {
  ArchiveSchema,
  deleteArchive,
  findArchiveByName,
  listArchives,
  readArchive,
  writeArchive,
} from './archives.ts';
export type { Archive, ArchiveInput, InvalidFile } from './archives.ts';
export { PinSchema, listPins, readPin, writePin } from './pins.ts';
export type { Pin, PinListing } from './pins.ts';
