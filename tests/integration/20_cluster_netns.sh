#!/usr/bin/env bash
# The cluster scenario (cluster_scenario.sh) with UCX over tcp between three network namespaces.
exec bash "$(dirname "$0")/cluster_scenario.sh" netns
