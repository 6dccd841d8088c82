/**
 * The nested-folder campaign in small (bench/folders.ts; the full one, 60 s of flipping and 200 messages to
 * the child on each runtime, is `npm run bench -- --only=folders`), on the process runtime and in
 * containers on a real dockerd: a parent's agent links and flips where its child's folder lay in the old
 * layout while messages and uploads reach the child, each in a run of its own. Every run of the child works
 * in the child's folder, every file lands there, and the decoy tree and the members-only group's folder
 * keep their bytes, modes and owners.
 */
import { describe, expect, test } from 'vitest';
import { folderCampaign } from '../../bench/folders.js';
import { AGENT_RUNTIMES, useAgentRuntime } from '../helpers/runtimes.js';

describe.each(AGENT_RUNTIMES)('on the %s runtime', (kind) => {
  const rt = useAgentRuntime(kind, 'folder-agent.mjs');
  test(
    "a parent's agent that links and flips its child's old folder never redirects the child's runs or uploads",
    async () => {
      const r = await folderCampaign({
        env: rt.env(),
        flipMs: 8000,
        flipMessages: 24,
        linkMessages: 4,
        uploadEvery: 3,
      });
      console.log(`${kind}: ${JSON.stringify(r)}`);
      expect(r.foreign).toEqual([]);
      expect(r.foreignRuns).toBe(0);
      expect(r.answers).toBe(r.flipMessages + 8);
      // Each message had a run of its own: the folder was resolved anew for every one of them.
      expect(r.childRuns).toBe(r.answers);
      // The race was on: the parent flipped while the child's messages were answered.
      expect(r.flipsDuringChildRuns).toBeGreaterThan(100);
      expect(r.uploads).toBeGreaterThanOrEqual(10);
      expect(r.uploadsInChild).toBe(r.uploads);
      expect(r.writtenOutside).toEqual([]);
      expect(r.decoyChanged).toBe(false);
      expect(r.secretChanged).toBe(false);
      expect(r.chownedOutside).toEqual([]);
    },
    rt.ms(120_000),
  );
});
