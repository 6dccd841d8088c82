import Database from 'better-sqlite3';

/**
 * An external writer, as another process (an adapter, a script with sqlite3) would be: inserts
 * `perGroup` messages for each of `groups` chats `bench:gN`, round-robin so every chat fills at once, each
 * carrying a unique token. rate 0: as fast as possible, in transactions of 100 rows; otherwise one row at
 * a time at `rate` rows/s. Prints {"count","ms"} on stdout.
 */
const [dbPath, groupsArg, perGroupArg, rateArg, startArg] = process.argv.slice(2);
const groups = Number(groupsArg);
const perGroup = Number(perGroupArg);
const rate = Number(rateArg ?? 0);
const firstToken = Number(startArg ?? 0);
const db = new Database(dbPath!);
db.pragma('busy_timeout = 10000');
const insert = db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES (?, 'bench', ?)`);
const rows: Array<[string, string]> = [];
let tok = firstToken;
for (let i = 0; i < perGroup; i++)
  for (let g = 0; g < groups; g++) rows.push([`bench:g${g}`, `tok-${tok++}`]);

const started = Date.now();
if (rate === 0) {
  const tx = db.transaction((batch: Array<[string, string]>) => batch.forEach((r) => insert.run(...r)));
  for (let i = 0; i < rows.length; i += 100) tx(rows.slice(i, i + 100));
  db.close();
  process.stdout.write(JSON.stringify({ count: rows.length, ms: Date.now() - started }) + '\n');
} else {
  let i = 0;
  const timer = setInterval(() => {
    insert.run(...rows[i++]!);
    if (i >= rows.length) {
      clearInterval(timer);
      db.close();
      process.stdout.write(JSON.stringify({ count: rows.length, ms: Date.now() - started }) + '\n');
    }
  }, 1000 / rate);
}
