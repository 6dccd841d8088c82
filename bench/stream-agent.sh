#!/usr/bin/env bash
# The streaming bench's agent (bench/streaming.ts): each stdin line is a turn answered by a long stream of
# drafts, a partial block every STREAM_TICK_MS (default 100) for STREAM_MS (default 20,000), each the
# answer so far, then the final block naming the tokens (tok-N) of the line. A line naming `canary` is
# answered at once. Lines that arrive while it streams wait for their turn.
#
# Fork-free: only bash builtins (`read -t` is the clock; the tokens are found with [[ =~ ]], the tick with
# arithmetic), so that once bash has started it starts no process of its own, at its start, per turn or per
# draft, and 200 of them starting at once on a loaded machine measure gated rather than the agents.
# When bash began this script and when it read its first line, in ms (EPOCHREALTIME is a builtin variable):
# the first partial names them, so the bench tells the agent's own start from gated's side of the first draft.
up=${EPOCHREALTIME/./}
up=${up:0:13}
tick_ms=${STREAM_TICK_MS:-100}
printf -v tick '%d.%03d' $((tick_ms / 1000)) $((tick_ms % 1000))
ticks=$((${STREAM_MS:-20000} / tick_ms))
pending=()
open=1
turn=0
emit() { printf -- '---GATED_OUTPUT_START---\n%s\n---GATED_OUTPUT_END---\n' "$1"; }
# The line's tokens (tok-N), each once, in order, into $toks.
tokens() {
  local rest=$1 seen=' '
  toks=''
  while [[ $rest =~ tok-[0-9]+ ]]; do
    local t=${BASH_REMATCH[0]}
    rest=${rest#*"$t"}
    [[ $seen == *" $t "* ]] && continue
    seen+="$t "
    toks+="$t "
  done
}
while :; do
  if ((${#pending[@]} == 0)); then
    ((open)) || exit 0
    IFS= read -r line || exit 0
    if ((turn == 0)); then
      got=${EPOCHREALTIME/./}
      got=${got:0:13}
    fi
    pending+=("$line")
  fi
  line=${pending[0]}
  pending=("${pending[@]:1}")
  turn=$((turn + 1))
  tokens "$line"
  if [[ $line != *canary* ]]; then
    text=""
    for ((i = 1; i <= ticks; i++)); do
      if ((open)) && IFS= read -r -t "$tick" more; then
        pending+=("$more")
      elif (($? < 128)); then
        open=0
        # stdin ended: gated closes it only when the agent is idle, so the stream just goes on.
      fi
      text+="word$i "
      ((turn == 1 && i == 1)) && text="up:$up in:$got $text"
      emit "{\"status\":\"ok\",\"partial\":true,\"turn\":$turn,\"result\":\"$text\"}"
    done
  fi
  emit "{\"status\":\"ok\",\"turn\":$turn,\"result\":\"answer $toks\"}"
done
