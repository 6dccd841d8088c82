# The benchmark's no-op agent: answers every stdin line at once with the tokens (tok-N) it saw in it, so
# the harness can trace each message. One awk process per run, no fork per line: the cost measured is
# gated's, not the agent's. Tokens appear twice in a line (prompt and messages); `seen` keeps one.
{
  out = ""
  s = $0
  while (match(s, /tok-[0-9]+/)) {
    t = substr(s, RSTART, RLENGTH)
    if (!(t in seen)) { seen[t] = 1; out = out " " t }
    s = substr(s, RSTART + RLENGTH)
  }
  printf "---GATED_OUTPUT_START---\n{\"status\":\"ok\",\"result\":\"%s\"}\n---GATED_OUTPUT_END---\n", out
  fflush()
}
