#!/usr/bin/env bash
# Fuzzes the LMDB sidecar decoder: kept for the commands in older notes;
# the same as `tools/fuzz.sh sidecar [--seconds N] [--runs N] [--seed S] [--out DIR]`.
exec "$(dirname "$0")/fuzz.sh" sidecar "$@"
