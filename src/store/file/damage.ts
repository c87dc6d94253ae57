// The state.errors reasons that mean the store found its files damaged (a corrupt snapshot, a
// damaged journal): each names what was preserved where. `doctor` fails while one is recorded, so
// damage never goes unnoticed; a new kind of damage the store detects gets its reason here.
export const DAMAGE_REASONS: ReadonlySet<string> = new Set(['state_corrupt', 'journal_cut', 'journal_missing']);
