# CDash: `ctest -T Test -L bench` records every suite's headline counters (the <CTestMeasurement>
# lines that reports/ctest_bench.py prints) in Testing/<tag>/Test.xml. Nothing is submitted anywhere
# unless you name your own CDash server, at configure time:
#   cmake -B build -DCTEST_SUBMIT_URL=https://cdash.example.org/submit.php?project=roofbench
# (or ctest -D CTEST_SUBMIT_URL=... in a dashboard script); then `ctest -T Submit` sends the results there.
set(CTEST_PROJECT_NAME "roofbench")
set(CTEST_NIGHTLY_START_TIME "00:00:00 UTC")
if(CTEST_SUBMIT_URL)
  set(CTEST_DROP_SITE_CDASH TRUE)
endif()
