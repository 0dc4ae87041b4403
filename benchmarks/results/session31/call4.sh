# Session 31 call 4 (same machine as call 3, its cache kept): ebm's warm load stage by stage
# (tools/load_stages.py), the session's start (ab/s31/base) and this tree alternating in fresh processes.
set -u
export PYTHONUNBUFFERED=1 JITKERNELS_CACHE=$PWD/build/jkcache
unset PYTHONDONTWRITEBYTECODE
echo "tree: $(cat commit.txt)" > $OUT/run.log
python3 -c "import loader; loader.prebuild(['ebm'])" > /dev/null 2>&1
(cd ab/s31/base && python3 -c "import loader; loader.prebuild(['ebm'])") > /dev/null 2>&1
for i in 1 2 3 4 5 6 7 8; do
  echo "base: $(cd ab/s31/base && python3 tools/load_stages.py ebm 2>&1 | tail -1)"
  echo "new:  $(python3 tools/load_stages.py ebm 2>&1 | tail -1)"
done 2>&1 | tee -a $OUT/run.log
