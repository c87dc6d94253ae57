// The console's numbers (protocol.md "Rules and defaults"), each with the reason for it.

/** The console's port unless `--port` says otherwise. */
export const DEFAULT_PORT = 4919;

/** A request body over this many characters is refused (413) without being parsed; the
 *  largest legitimate body is a 2000-character save summary. */
export const MAX_BODY_CHARS = 1_000_000;
