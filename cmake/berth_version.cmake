# Run at build time (cmake -P) by the berth_version target. Writes OUTPUT, the header that
# `berth --version` prints from: "VERSION (git DESCRIBE)" when SOURCE_DIR is a git checkout
# (`git describe --always --dirty`), else VERSION. configure_file rewrites OUTPUT only when its
# text changes, so a new commit recompiles engine/cli/main.cc and nothing else.
set(BERTH_BUILD_VERSION "${VERSION}")
if(EXISTS "${SOURCE_DIR}/.git")
  find_program(GIT_EXECUTABLE git)
  if(GIT_EXECUTABLE)
    execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty
                    WORKING_DIRECTORY "${SOURCE_DIR}"
                    OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0 AND NOT describe STREQUAL "")
      set(BERTH_BUILD_VERSION "${VERSION} (git ${describe})")
    endif()
  endif()
endif()
configure_file("${SOURCE_DIR}/cmake/berth_build_version.h.in" "${OUTPUT}" @ONLY)
