# Session 33 call 13 (the review's mend: tc16::load_rows serves the energy/score kernel too; the chains' SASS
# rescheduled): the chains against af90fd3's kernels (ab/s33/prev) in one process, then ebm's CUDA chain tests.
set -u
export PYTHONPATH=$PWD JITKERNELS_CACHE=/tmp/jitkernels-cache
echo "tree: $(cat commit.txt)" > $OUT/run.log
timeout 300 python3 ab/s33/review_ab.py 2>&1 | grep -v "^\[jitkernels\]\|^ebm  " >> $OUT/run.log
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 --timeout 120 tests/test_ebm.py -k "cuda and (chain or hmc or langevin or gaussian)" > $OUT/pytest.log 2>&1
echo "pytest rc $?" >> $OUT/run.log; tail -2 $OUT/pytest.log >> $OUT/run.log; grep -E "^FAILED" $OUT/pytest.log | head >> $OUT/run.log
