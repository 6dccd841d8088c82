import Database from 'better-sqlite3';

/**
 * The crash campaign's external writer (bench/crash.ts): another process inserting `count` inbound rows
 * into the chats `telegram:-1000000 - c`, round-robin, evenly over `ms`, one small transaction at a time,
 * as another adapter or a script with sqlite3 would. Each carries a unique token `tok-N` (N from 0). It
 * does not care whether gated is up: the database is the bus. Its senders are `9000 + c`, or `senderBase + c`
 * when given (the channel's users, so that each chat is one person writing two ways).
 */
const [dbPath, chatsArg, countArg, msArg, senderBaseArg] = process.argv.slice(2);
const senderBase = senderBaseArg === undefined ? 9000 : Number(senderBaseArg);
const chats = Number(chatsArg);
const count = Number(countArg);
const ms = Number(msArg);
const db = new Database(dbPath!);
db.pragma('busy_timeout = 10000');
const insert = db.prepare(
  `INSERT INTO messages (chat_jid, sender, sender_name, content) VALUES (?, ?, ?, ?)`,
);
const started = Date.now();
for (let i = 0; i < count; i++) {
  const c = i % chats;
  insert.run(`telegram:${-1_000_000 - c}`, String(senderBase + c), `writer ${c}`, `from outside tok-${i}`);
  const due = started + ((i + 1) * ms) / count;
  const wait = due - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
db.close();
