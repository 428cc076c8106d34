# CPack: `cpack -G DEB` in a build directory makes berth_VERSION_ARCH.deb from the install rules
# (cmake/berth_install.cmake), installed under /usr: /usr/bin/berth, units in the distribution's
# unit directory. Depends: from dpkg-shlibdeps (needs dpkg-dev). CI builds it from the Release
# build and runs lintian on it (.ci/package).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME berth)
set(CPACK_PACKAGE_VENDOR "The berth authors")
set(CPACK_PACKAGE_CONTACT "${BERTH_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${BERTH_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "declarative model serving on GPU hosts")
# The synopsis is CPACK_PACKAGE_DESCRIPTION_SUMMARY; this is the extended description.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "Manifests in git say which models must be on disk and which model servers
(vLLM, SGLang, llama.cpp server, any command) must run on which GPUs and
ports. berth observes the host, plans the change in a safe order with a
reason for every step, checks that it fits (disk, GPU memory, ports) before
touching anything, and carries it out through systemd units.")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# berth drives systemd over D-Bus; `berth plan --observed` works without it. HAProxy holds a
# public port while its model server changes (the front, berth-front-PORT.service); hosts
# without a front do not need it.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd, haproxy")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Install as /usr with DESTDIR staging, so that the unit install script sees the real prefix.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
include(CPack)
