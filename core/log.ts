import pino from 'pino';

/** The logger every module takes through its options; child loggers add who and what. */
export type Logger = pino.Logger;

/**
 * The process logger: JSON lines, pretty when stdout is a TTY. Tokens are redacted by path wherever they
 * might appear in a logged object, and modules never log secrets to begin with.
 */
export function createLogger(level = 'info', pretty = process.stdout.isTTY === true): Logger {
  return pino({
    level,
    base: undefined,
    redact: {
      paths: ['token', '*.token', 'password', '*.password', 'authorization', '*.authorization', 'adminToken'],
      censor: '[redacted]',
    },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { colorize: true } } } : {}),
  });
}

/** A logger that drops everything (tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
