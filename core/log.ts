import pino from 'pino';
import { logTraceFields } from './trace.js';

/** The logger every module takes through its options; child loggers add who and what. */
export type Logger = pino.Logger;

/**
 * The process logger: JSON lines, pretty when stdout is a TTY. Tokens are redacted by path wherever they
 * might appear in a logged object, and modules never log secrets to begin with. While traces are exported,
 * a line written in a message's or a run's work carries its `trace_id` and `span_id` (core/trace.ts).
 * `destination` replaces stdout (tests read the lines).
 */
export function createLogger(
  level = 'info',
  pretty = process.stdout.isTTY === true,
  destination?: pino.DestinationStream,
): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: undefined,
    mixin: logTraceFields,
    redact: {
      paths: ['token', '*.token', 'password', '*.password', 'authorization', '*.authorization', 'adminToken'],
      censor: '[redacted]',
    },
    ...(pretty && !destination ? { transport: { target: 'pino-pretty', options: prettyOptions() } } : {}),
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * How log lines look on a terminal (pino-pretty): the level in colour (none with NO_COLOR set), the local
 * clock time, the part of gated that logged (`queue · run ended`) before the message, and the other fields
 * indented below it. Plain data, because pino hands it to a worker thread.
 */
export function prettyOptions(env: Record<string, string | undefined> = process.env) {
  return {
    colorize: env.NO_COLOR === undefined,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,part,mod',
    messageFormat: '{if part}{part} · {end}{if mod}{mod} · {end}{msg}',
  };
}

/** A logger that drops everything (tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
