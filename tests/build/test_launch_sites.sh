#!/usr/bin/env bash
# Every kernel launch of the library goes through dsv4_launch (src/common/launch.h): a
# <<<...>>> launch's own failure would never reach dsv4_launch_status, which reads only
# the statuses dsv4_launch noted.
set -u
src=${1:?usage: test_launch_sites.sh SRC_DIR}
if hits=$(grep -rn --include='*.cu' --include='*.cuh' '<<<' "$src"); then
  echo "kernel launches outside dsv4_launch:"
  echo "$hits"
  exit 1
fi
echo "every launch under $src goes through dsv4_launch"
