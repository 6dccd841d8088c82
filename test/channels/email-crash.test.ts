/**
 * The email channel across kill -9 of gated: the real `gated run` reads a real Dovecot (test/infra/mail.ts)
 * and is killed while it works through a backlog of ten mails (fetching one, storing it, moving the cursor, the
 * next), twice. After the last restart every mail is stored once and answered, by the example agent
 * through the real Postfix, with one distinct answer per mail.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, gatedUp, until } from '../helpers/process.js';
import { BOT, emailEnv, startMailWorld, type MailWorld } from '../infra/mail.js';

const ALICE = 'alice@example.test';
let world: MailWorld;

beforeAll(async () => {
  world = await startMailWorld([ALICE]);
}, 60_000);
afterAll(async () => {
  await world?.stop();
});

describe('email across kill -9', () => {
  it('reads a backlog killed twice mid-way: every mail stored once and answered', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir, { GATED_IDLE_TIMEOUT_MS: '300', ...emailEnv(world) });
    const seed = openDatabase(env.GATED_DB);
    addGroup(seed, env.GATED_GROUPS_DIR, 'mail');
    seed.prepare("INSERT INTO routes (seq, match, target) VALUES (0, 'platform=email', 'mail')").run();
    seed.close();

    // A first start fixes the cursor (mail from now on); then the backlog arrives while gated is down.
    const first = await gatedUp(gatedRun(env));
    const watch = new Database(env.GATED_DB, { readonly: true });
    await until(
      () => watch.prepare("SELECT 1 FROM router_state WHERE key = 'email.cursor'").get(),
      20_000,
      'the cursor',
    );
    first.kill('SIGTERM');
    expect(await exited(first)).toBe(0);
    const from = await world.nextUid(ALICE);
    const sent: string[] = [];
    for (let i = 0; i < 10; i += 1) {
      sent.push(await world.send(ALICE, { to: BOT.address, subject: `m${i}`, text: `mail ${i}` }));
    }
    await world.settled();

    const stored = () =>
      watch.prepare('SELECT count(*) FROM messages WHERE is_from_me = 0').pluck().get() as number;
    for (const killAt of [3, 6]) {
      const g = gatedRun(env);
      await until(() => stored() >= killAt, 30_000, `${killAt} mails stored`);
      g.kill('SIGKILL');
      await exited(g);
    }
    expect(stored()).toBeLessThan(10);
    const last = await gatedUp(gatedRun(env));
    await until(
      () =>
        (watch
          .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'sent'`)
          .pluck()
          .get() as number) >= 10,
      60_000,
      'ten answers sent',
    );
    last.kill('SIGTERM');
    expect(await exited(last)).toBe(0);

    const ids = watch
      .prepare('SELECT platform_msg_id FROM messages WHERE is_from_me = 0 ORDER BY id')
      .pluck()
      .all() as string[];
    watch.close();
    expect([...ids].sort()).toEqual([...sent].sort());
    await world.settled();
    const answers = await world.inbox(ALICE, from - 1);
    // One answer per mail; a mail sent again after a crash would carry the same Message-ID.
    expect(new Set(answers.map((a) => a.mail.inReplyTo)).size).toBe(10);
    expect(new Set(answers.map((a) => a.mail.messageId)).size).toBe(10);
    expect(new Set(answers.map((a) => a.mail.inReplyTo))).toEqual(new Set(sent));
  }, 180_000);
});
