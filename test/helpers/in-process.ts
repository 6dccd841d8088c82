/**
 * The gateds a test runs in this process (startTestGated adds and removes them). The in-process CLI
 * (gatedCli) reads it: while one runs here, a CLI write waiting on SQLite's busy handler would stop the
 * only event loop, and with it the group commit that holds the lock (store/group-commit.ts), until the
 * 30 s busy timeout and SQLITE_BUSY. The CLI then runs as its own process, as an operator's does.
 */
export const inProcessGateds = new Set<object>();
