# CDash: `ctest -T Test -L bench` records every suite's headline counters (the <CTestMeasurement>
# lines that reports/ctest_bench.py prints) in Testing/<tag>/Test.xml; `ctest -T Submit` sends them.
# Point it at your own server with -DCTEST_SUBMIT_URL=https://cdash.example.org/submit.php?project=roofbench
# (or ctest -D CTEST_SUBMIT_URL=... for a dashboard script).
set(CTEST_PROJECT_NAME "roofbench")
set(CTEST_NIGHTLY_START_TIME "00:00:00 UTC")
if(NOT CTEST_SUBMIT_URL)
  set(CTEST_SUBMIT_URL "https://my.cdash.org/submit.php?project=roofbench")
endif()
set(CTEST_DROP_SITE_CDASH TRUE)
