/**
 * Process exit codes shared by every subcommand (documented in docs/worker.md and docs/operations.md).
 * 0 success; 1 a verification check failed; 2 configuration or usage error; 3 internal error.
 */
export const ExitCode = {
  OK: 0,
  CHECK_FAILED: 1,
  CONFIG_ERROR: 2,
  INTERNAL_ERROR: 3,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/**
 * A problem with the user's input (config file, flags, environment). The CLI prints
 * `error: <message>` without a stack trace and exits with ExitCode.CONFIG_ERROR.
 * The message names the field and what is allowed.
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(
    message: string,
    readonly field?: string,
  ) {
    super(field ? `${field}: ${message}` : message);
  }
}

/** Marks an error a controller must not retry (logged, not requeued). */
export class TerminalError extends Error {
  override name = 'TerminalError';
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
