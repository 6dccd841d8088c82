-- The example routing table of the README and docs/ROUTING.md.
-- Load it into a database created by `gated init`:   sqlite3 data/gated.db < routes.example.sql
-- Rows are tried in (seq, id) order; the first whose key=glob pairs all match gives the target.
INSERT INTO routes (seq, match, target) VALUES (0, 'room=-5075870332', 'krons/content');
INSERT INTO routes (seq, match, target) VALUES (10, 'platform=telegram verb=mention', 'rhias/mentions');
INSERT INTO routes (seq, match, target) VALUES (20, 'verb=follow', 'krons/notifs');
INSERT INTO routes (seq, match, target) VALUES (30, 'platform=bluesky', 'bsky/feed');
INSERT INTO routes (seq, match, target) VALUES (99, '', 'default/firehose');
