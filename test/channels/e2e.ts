import type { Gated } from '../../gated/app.js';
import { startTestGated } from '../helpers/gated.js';
import { E2E_ENV, seedGroups, type E2eSeed } from './support.js';

/**
 * The whole gateway for an end-to-end test (test/helpers/gated.ts, without HTTP): E2E_ENV plus the platform
 * settings in `env`, the groups and routes of `seed` stored before it starts. It is closed after the test,
 * before the local platform servers the test gave to closedAfterGateds; a test that closes it earlier (to
 * restart on the same database) uses closeTestGated.
 */
export function startE2eGated(env: Record<string, string>, seed: E2eSeed): Promise<Gated> {
  return startTestGated({
    http: false,
    graceMs: 2000,
    env: { ...E2E_ENV, ...env },
    seed: (db, config) => seedGroups(db, config.groupsDir, seed),
  });
}
