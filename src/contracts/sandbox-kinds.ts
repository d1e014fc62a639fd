/**
 * The isolation technologies an agent can run jobs with, strongest first. A plain list (no zod) so
 * the CLI can name them in its help without loading the protocol schemas.
 */
export const SANDBOX_KINDS = ['gvisor', 'bwrap', 'none'] as const;
