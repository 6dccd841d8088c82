import type { Command } from 'commander';
import { UsageError } from '../../core/errors.js';
import { parseJid } from '../../core/types.js';
import { applySchema } from '../../store/db.js';
import { insertInbound } from '../../store/messages.js';
import { action } from '../context.js';

/** `gated init` and `gated send`. */
export function messagesCommands(program: Command): void {
  program
    .command('init')
    .description('create or upgrade the database from schema.sql')
    .action(
      action((ctx) => {
        const version = applySchema(ctx.db({ create: true }));
        ctx.out(`database ${ctx.config.db} at schema version ${version}`);
      }),
    );

  program
    .command('send')
    .description('insert an inbound message, as an adapter would')
    .argument('<jid>', 'platform:room, e.g. telegram:-5075870332 or web:demo')
    .argument('<text>')
    .option('--sender <id>', 'sender id', 'cli')
    .option('--verb <verb>', 'message, mention, reply, reaction, follow, …', 'message')
    .option('--topic <topic>', 'topic of the message (without #)', '')
    .action(
      action((ctx, jid: string, text: string, opts: { sender: string; verb: string; topic: string }) => {
        const { platform, room } = parseJid(jid);
        if (!platform || !room) throw new UsageError(`bad JID '${jid}': expected platform:room`);
        if (!/^[a-z_]+$/.test(opts.verb)) throw new UsageError(`bad verb '${opts.verb}'`);
        const id = insertInbound(ctx.db({ create: true }), {
          chat_jid: jid,
          sender: opts.sender,
          content: text,
          verb: opts.verb,
          topic: opts.topic.replace(/^#/, ''),
        });
        ctx.out(String(id));
      }),
    );
}
