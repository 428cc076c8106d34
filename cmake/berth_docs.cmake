# Run at build time (cmake -P) by the berth_docs target: berth writes its man page and bash
# completion from its own command tree (engine/cli/cli_docs.h) into DIR: berth.1, berth.1.gz
# (gzip -9n: no name, no time, so the same berth gives the same bytes) and berth.bash.
function(berth_run_to_file out)
  execute_process(COMMAND ${ARGN} OUTPUT_FILE "${out}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "berth docs: `${ARGN}` failed (${rc}): ${err}")
  endif()
endfunction()
file(MAKE_DIRECTORY "${DIR}")
berth_run_to_file("${DIR}/berth.1" "${BERTH}" __man)
berth_run_to_file("${DIR}/berth.1.gz" gzip -9n -c "${DIR}/berth.1")
berth_run_to_file("${DIR}/berth.bash" "${BERTH}" completion bash)
# The changelog (configured from engine/dist/changelog.in) goes into the docs too.
berth_run_to_file("${DIR}/changelog.gz" gzip -9n -c "${CHANGELOG}")
