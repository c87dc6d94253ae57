// The environment an installed MCP server entry carries (FEATURES.md §8.1, §8.3): the member id
// comes from `opencomms install-member`; until then a placeholder that doctor reports and that
// install-member replaces in place.
export const MEMBER_ID_PLACEHOLDER = '<set by: opencomms install-member>';
export const ROLE_PLACEHOLDER = '<role label>';

export const memberEnv = (pin: string | null) => ({
  OPENCOMMS_MEMBER_ID: pin ?? MEMBER_ID_PLACEHOLDER,
  OPENCOMMS_MEMBER_ROLE: ROLE_PLACEHOLDER,
});

/** argv of the installed MCP server bundle for one project and host label. */
export const serverArgs = (bundlePath: string, project: string, host: string) => [bundlePath, project, '--host', host];
