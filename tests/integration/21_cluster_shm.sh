#!/usr/bin/env bash
# The cluster scenario (cluster_scenario.sh) with UCX over shared memory on one host.
exec bash "$(dirname "$0")/cluster_scenario.sh" shm
