/**
 * Access by sender address over mail (§12 through the email channel): the real `gated run` reads a real
 * Dovecot and sends through a real Postfix (test/infra/mail.ts). In an `approval` group a stranger's mail is
 * held and answered once with a pairing code; an owner approves it by mail; the held mail is then answered
 * by the agent, once. A blocked address is never answered at all.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, gatedUp, until } from '../helpers/process.js';
import { BOT, emailEnv, startMailWorld, type MailWorld } from '../infra/mail.js';

const OWNER = 'alice@example.test';
const STRANGER = 'carol@example.test';
const BLOCKED = 'mallory@example.test';
let world: MailWorld;

beforeAll(async () => {
  world = await startMailWorld([OWNER, STRANGER, BLOCKED]);
}, 60_000);
afterAll(async () => {
  await world?.stop();
});

describe('email access', () => {
  it('holds a stranger with a pairing code by mail, an owner approves by mail, the held mail is answered once', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir, { GATED_IDLE_TIMEOUT_MS: '300', ...emailEnv(world) });
    const seed = openDatabase(env.GATED_DB);
    addGroup(seed, env.GATED_GROUPS_DIR, 'mail');
    seed.prepare("UPDATE registered_groups SET access = 'approval' WHERE folder = 'mail'").run();
    seed
      .prepare("INSERT INTO members (group_folder, sender, role) VALUES ('mail', ?, 'owner')")
      .run(`email:${OWNER}`);
    seed
      .prepare("INSERT INTO members (group_folder, sender, role) VALUES ('mail', ?, 'blocked')")
      .run(`email:${BLOCKED}`);
    seed.prepare("INSERT INTO routes (seq, match, target) VALUES (0, 'platform=email', 'mail')").run();
    seed.close();

    const g = await gatedUp(gatedRun(env));
    const watch = new Database(env.GATED_DB, { readonly: true });
    try {
      await until(
        () => watch.prepare("SELECT 1 FROM router_state WHERE key = 'email.cursor'").get(),
        20_000,
        'the mailbox cursor',
      );
      const strangerFrom = await world.nextUid(STRANGER);
      const ownerFrom = await world.nextUid(OWNER);
      const blockedFrom = await world.nextUid(BLOCKED);

      await world.send(BLOCKED, { to: BOT.address, subject: 'spam', text: 'buy now' });
      const held = await world.send(STRANGER, { to: BOT.address, subject: 'hi', text: 'may I ask?' });
      await world.settled();
      const codeMail = await until(
        async () => {
          await world.settled();
          return (await world.inbox(STRANGER, strangerFrom - 1)).find((m) =>
            /pairing code is ([A-Z2-9]{8})/.test(m.mail.text ?? ''),
          );
        },
        30_000,
        'the pairing code mail',
      );
      const code = /pairing code is ([A-Z2-9]{8})/.exec(codeMail.mail.text ?? '')![1]!;
      expect(codeMail.mail.inReplyTo).toBe(held);
      const state = () =>
        watch.prepare('SELECT state FROM messages WHERE platform_msg_id = ?').pluck().get(held) as string;
      expect(state()).toBe('pending');

      // The owner decides by mail, from their own chat with the bot.
      await world.send(OWNER, { to: BOT.address, subject: 'ok', text: `/approve ${code}` });
      const answer = await until(
        async () => {
          await world.settled();
          return (await world.inbox(STRANGER, strangerFrom - 1)).find((m) =>
            /echo:[\s\S]*may I ask\?/.test(m.mail.text ?? ''),
          );
        },
        40_000,
        "the agent's answer to the held mail",
      );
      expect(answer.mail.inReplyTo).toBe(held);
      await until(
        async () => {
          await world.settled();
          return (await world.inbox(OWNER, ownerFrom - 1)).length > 0;
        },
        20_000,
        'the owner told',
      );

      // Settle, then count: one code, one answer for the stranger; nothing at all for the blocked address.
      await new Promise((r) => setTimeout(r, 1500));
      await world.settled();
      const toStranger = await world.inbox(STRANGER, strangerFrom - 1);
      expect(toStranger.filter((m) => /pairing code/.test(m.mail.text ?? ''))).toHaveLength(1);
      expect(toStranger.filter((m) => /echo:[\s\S]*may I ask\?/.test(m.mail.text ?? ''))).toHaveLength(1);
      expect(await world.inbox(BLOCKED, blockedFrom - 1)).toHaveLength(0);
      expect(
        watch
          .prepare("SELECT count(*) FROM members WHERE group_folder = 'mail' AND sender = ?")
          .pluck()
          .get(`email:${STRANGER}`),
      ).toBe(1);
    } finally {
      watch.close();
      g.kill('SIGTERM');
      expect(await exited(g)).toBe(0);
    }
  }, 150_000);
});
