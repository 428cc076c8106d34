# Part of `cmake --install` (and of CPack's staging install): installs engine/dist's units. It
# runs at install time because only then is the prefix known (`--prefix`, /usr in the .deb).
# Each unit's ExecStart= names the installed berth (PREFIX/BINDIR/berth) instead of
# /usr/local/bin/berth. The units go where systemd reads units of that prefix:
#   BERTH_SYSTEMD_UNIT_DIR when set (an absolute path);
#   for the prefix /usr, the distribution's unit directory (pkg-config systemd's
#   systemdsystemunitdir, /lib/systemd/system on Debian 12), else /usr/lib/systemd/system;
#   for any other prefix, PREFIX/lib/systemd/system (systemd reads /usr/local/lib/systemd/system;
#   under other prefixes, link the units into /etc/systemd/system).
# Set by the install(CODE) before this script: BERTH_DIST_DIR, BERTH_STAGE_DIR,
# BERTH_INSTALL_BINDIR, BERTH_SYSTEMD_UNIT_DIR, BERTH_DISTRO_UNIT_DIR.
if(BERTH_SYSTEMD_UNIT_DIR)
  set(unit_dir "${BERTH_SYSTEMD_UNIT_DIR}")
elseif(CMAKE_INSTALL_PREFIX STREQUAL "/usr" AND BERTH_DISTRO_UNIT_DIR)
  set(unit_dir "${BERTH_DISTRO_UNIT_DIR}")
else()
  set(unit_dir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
set(berth_path "${CMAKE_INSTALL_PREFIX}/${BERTH_INSTALL_BINDIR}/berth")
file(MAKE_DIRECTORY "${BERTH_STAGE_DIR}")
foreach(unit berth.service berth-reconcile.service berth-reconcile.timer)
  file(READ "${BERTH_DIST_DIR}/${unit}" text)
  string(REPLACE "/usr/local/bin/berth" "${berth_path}" text "${text}")
  file(WRITE "${BERTH_STAGE_DIR}/${unit}" "${text}")
  file(INSTALL DESTINATION "${unit_dir}" TYPE FILE
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES "${BERTH_STAGE_DIR}/${unit}")
endforeach()
