# `cmake --install`: berth in BINDIR, its engine checks in LIBEXECDIR/berth/engine-check, engine/dist's units where systemd reads them (with
# ExecStart= naming the installed berth), the manifest schema and examples in DATADIR/berth,
# berth(1) and the bash completion written by berth itself, the copyright and changelog in
# DOCDIR. CPack (cmake/berth_package.cmake) builds the .deb from the same rules.
include(GNUInstallDirs)

install(TARGETS berth RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The engine checks berth runs before anything goes dark: LIBEXECDIR/berth/engine-check/, which
# berth finds as ../libexec/berth/engine-check/ from its own executable. Not executable, no #!
# line: berth runs each with the interpreter of the engine it checks.
install(FILES engine/dist/engine-check/vllm_check.py engine/dist/engine-check/sglang_check.py
        DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/berth/engine-check)
install(FILES manifests/schema.json DESTINATION ${CMAKE_INSTALL_DATADIR}/berth)
install(DIRECTORY manifests/examples DESTINATION ${CMAKE_INSTALL_DATADIR}/berth)
install(FILES ${BERTH_DOCS_DIR}/berth.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${BERTH_DOCS_DIR}/berth.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME berth)

# The Debian changelog of this version, gzipped with the docs (engine/CMakeLists.txt).
install(FILES engine/dist/copyright ${BERTH_DOCS_DIR}/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The units: at install time, when the prefix is known (cmake/berth_install_units.cmake).
set(BERTH_SYSTEMD_UNIT_DIR "" CACHE PATH
    "Where `cmake --install` puts berth's systemd units (empty: where systemd reads units of the install prefix)")
set(distro_unit_dir "")
pkg_get_variable(distro_unit_dir systemd systemdsystemunitdir)
install(CODE "
  set(BERTH_DIST_DIR \"${PROJECT_SOURCE_DIR}/engine/dist\")
  set(BERTH_STAGE_DIR \"${CMAKE_BINARY_DIR}/dist/units\")
  set(BERTH_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(BERTH_SYSTEMD_UNIT_DIR \"${BERTH_SYSTEMD_UNIT_DIR}\")
  set(BERTH_DISTRO_UNIT_DIR \"${distro_unit_dir}\")")
install(SCRIPT cmake/berth_install_units.cmake)
