#!/usr/bin/env bash
# locate's picture confidence (engine/vpe.c CAL_*) is the fit of the committed calibration
# data (vision/train/vpe_calibration.jsonl) by scripts/vpe_calibrate.py: a change to either
# side without the other fails here.
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/tests/lib.sh"
out=$(/usr/bin/python3 "$here/scripts/vpe_calibrate.py" fit "$here/vision/train/vpe_calibration.jsonl" \
      --check "$here/engine/vpe.c" 2>&1)
rc=$?
[ $rc -eq 0 ] && ok "vpe.c's calibration constants are the fit of the committed data" ||
  { bad "vpe.c's calibration constants differ from the fit"; printf '%s\n' "$out" | tail -5; }
# the held-out summary the README and vpe.c quote: 7 of 511 absent descriptions answered
printf '%s\n' "$out" | grep -q '^all .*absent 7/511' && ok "held out: 7 of 511 absent descriptions answered" ||
  bad "held-out summary changed: $(printf '%s\n' "$out" | grep '^all')"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
