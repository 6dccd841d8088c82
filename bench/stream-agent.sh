#!/usr/bin/env bash
# The streaming bench's agent (bench/streaming.ts): each stdin line is a turn answered by a long stream of
# drafts, a partial block every STREAM_TICK_MS (default 100) for STREAM_MS (default 20,000), each the
# answer so far, then the final block naming the tokens (tok-N) of the line. A line naming `canary` is
# answered at once. bash with `read -t` as its clock: no fork per draft, a few MB per agent, so that 200 of
# them measure gated rather than the agents. Lines that arrive while it streams wait for their turn.
tick=$(awk "BEGIN { printf \"%.3f\", ${STREAM_TICK_MS:-100} / 1000 }")
ticks=$(( ${STREAM_MS:-20000} / ${STREAM_TICK_MS:-100} ))
pending=()
open=1
turn=0
emit() { printf -- '---GATED_OUTPUT_START---\n%s\n---GATED_OUTPUT_END---\n' "$1"; }
tokens() { grep -o 'tok-[0-9]*' <<<"$1" | sort -u | tr '\n' ' '; }
while :; do
  if ((${#pending[@]} == 0)); then
    ((open)) || exit 0
    IFS= read -r line || exit 0
    pending+=("$line")
  fi
  line=${pending[0]}
  pending=("${pending[@]:1}")
  turn=$((turn + 1))
  toks=$(tokens "$line")
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
      emit "{\"status\":\"ok\",\"partial\":true,\"turn\":$turn,\"result\":\"$text\"}"
    done
  fi
  emit "{\"status\":\"ok\",\"turn\":$turn,\"result\":\"answer $toks\"}"
done
