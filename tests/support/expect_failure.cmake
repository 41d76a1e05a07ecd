# Runs a command that must fail: a non-zero exit status, within TIMEOUT seconds, with output
# (stdout and stderr together) matching every regular expression in EXPECT (a ;-list), and
# optionally a minimum number of matches of COUNT_REGEX (e.g. one line per rank) and an exact
# EXIT_CODE.
#   cmake -DCOMMAND="a@@b@@c" -DEXPECT="re1@@re2" [-DCOUNT_REGEX=re -DMIN_COUNT=n] [-DEXIT_CODE=c]
#         -DTIMEOUT=60 -P ...
# (lists are joined with "@@" to survive the trip through add_test).
string(REPLACE "@@" ";" COMMAND "${COMMAND}")
string(REPLACE "@@" ";" EXPECT "${EXPECT}")
if(NOT TIMEOUT)
  set(TIMEOUT 60)
endif()
string(TIMESTAMP started "%s")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT ${TIMEOUT})
string(TIMESTAMP finished "%s")
math(EXPR elapsed "${finished} - ${started}")
set(output "${out}${err}")
message("--- output of: ${COMMAND}\n${output}--- status: ${status}, ${elapsed} s")
if(status MATCHES "timeout|Process terminated due to timeout")
  message(FATAL_ERROR "did not finish within ${TIMEOUT} s (a hang)")
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "exited with status 0; expected a failure")
endif()
if(NOT "${EXIT_CODE}" STREQUAL "" AND NOT status EQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "exited with status ${status}; expected ${EXIT_CODE}")
endif()
foreach(re IN LISTS EXPECT)
  if(NOT output MATCHES "${re}")
    message(FATAL_ERROR "output does not match '${re}'")
  endif()
endforeach()
if(COUNT_REGEX)
  string(REGEX MATCHALL "${COUNT_REGEX}" matches "${output}")
  list(LENGTH matches found)
  if(found LESS MIN_COUNT)
    message(FATAL_ERROR "'${COUNT_REGEX}' matched ${found} times, expected at least ${MIN_COUNT}")
  endif()
endif()
