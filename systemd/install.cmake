# SPDX-License-Identifier: MIT
# Install rules for the system integration: tided.service, the sysusers.d
# and tmpfiles.d entries that create the "tide" user and its directories, the
# example configuration and the README. Included once from
# client/CMakeLists.txt (these files have no target of their own).
#
# The work happens at install time (systemd/install-system.cmake.in), so
# that `cmake --install --prefix P` and DESTDIR= apply to the unit as to
# everything else: the installed unit's ExecStart names tided where that
# prefix puts it (daemon/CMakeLists.txt installs it into the sbin directory),
# and outside /etc it also names the configuration file. /etc/tide/tided.conf
# starts as a copy of the example and is never replaced once it exists.
include_guard(GLOBAL)

set(TIDE_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
    "Where tided.service goes, relative to the prefix (or absolute)")
set(TIDE_SYSUSERS_DIR "lib/sysusers.d" CACHE STRING "Where sysusers.d/tide.conf goes")
set(TIDE_TMPFILES_DIR "lib/tmpfiles.d" CACHE STRING "Where tmpfiles.d/tide.conf goes")

configure_file(${PROJECT_SOURCE_DIR}/systemd/install-system.cmake.in
               ${PROJECT_BINARY_DIR}/systemd/install-system.cmake @ONLY)
install(SCRIPT ${PROJECT_BINARY_DIR}/systemd/install-system.cmake)
