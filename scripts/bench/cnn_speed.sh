#!/usr/bin/env bash
# Replaced by scripts/bench/model_speed.sh --model cnn (issue 33).
echo "cnn_speed.sh: replaced by scripts/bench/model_speed.sh --model cnn (see its --help)" >&2
exit 2
