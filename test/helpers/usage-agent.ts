/**
 * A shell agent that reports usage without a cost, as the cost tests need (docs/COSTS.md): each turn is a
 * tool call's end with 1,000 input tokens of model m-test, then an answer with 2,000 output tokens. At
 * `gated prices set m-test 3 15` that is $0.003 mid-turn and $0.03 with the answer: $0.033 and 3,000
 * tokens a run.
 */
export const USAGE_TOOL =
  '{"status":"ok","result":null,"tool_result":{"id":"t1","tool":"Bash","input":{"command":"ls"},"bytes":3},"usage":{"input_tokens":1000,"output_tokens":0,"model":"m-test"}}';
export const USAGE_ANSWER =
  '{"status":"ok","result":"priced","usage":{"input_tokens":0,"output_tokens":2000,"model":"m-test"}}';
/** GATED_AGENT_CMD of the agent. Turns only: the receipt lines gated answers tool results with are not. */
export const USAGE_AGENT = `while IFS= read -r line; do case "$line" in *'"turn"'*) for b in '${USAGE_TOOL}' '${USAGE_ANSWER}'; do printf '%s\\n' '---GATED_OUTPUT_START---' "$b" '---GATED_OUTPUT_END---'; done;; esac; done`;
