#!/usr/bin/env bash
# Replaced by scripts/bench/model_speed.sh --model gpt-mini (issue 33).
echo "gpt_speed.sh: replaced by scripts/bench/model_speed.sh --model gpt-mini (see its --help)" >&2
exit 2
