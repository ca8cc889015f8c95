# Debian packages built with CPack from the install() components (docs/install.md, "Debian
# packages"): `cpack --config build/CPackConfig.cmake` after a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr, or scripts/package.sh, which also tests them in a fresh
# Debian root.
#
#   component  package             what
#   propeller  propeller           the programs, libpropeller.so.N, man pages, bash
#                                  completion, systemd units, example configuration
#   dev        libpropeller-dev    headers, libpropeller.so, propeller.pc, CMake package
#   python     python3-propeller   the Python package (python/), when it is built
#
# Each description: its first line is the synopsis, the rest the long text.
# Library dependencies come from dpkg-shlibdeps (CPACK_DEBIAN_PACKAGE_SHLIBDEPS), so they
# follow what the binaries really link; what they run (fusermount3) is listed by hand.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME propeller)
set(CPACK_PACKAGE_VENDOR "The Propeller authors")
set(CPACK_PACKAGE_CONTACT "Propeller maintainers <propeller@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # name_version_arch.deb
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # as Debian ships binaries; the build tree keeps the debug info
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# dpkg-shlibdeps must find libpropeller.so.N, which the python package may link.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_PROPELLER_PACKAGE_NAME propeller)
set(CPACK_DEBIAN_PROPELLER_PACKAGE_DEPENDS "fuse3")
set(CPACK_DEBIAN_PROPELLER_DESCRIPTION
    "real-time file-metadata search for Linux
Propeller indexes file metadata as it changes: a FUSE mount captures every change and which
files a process read before it wrote another, index nodes keep per-partition indexes, and
searches (a query language, query directories, `propeller find`, live queries) answer
exactly and at once. This package has the propeller command, the propeller-master and
propeller-indexnode daemons with their systemd units, the shared client library, man pages
and bash completion.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libpropeller-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "propeller (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Propeller client library: development files
Headers (<propeller/propeller_c.h>, the C ABI; <propeller/propeller.h>, the C++20 API), the
libpropeller.so link, a pkg-config file (propeller.pc) and a CMake package
(find_package(Propeller), target Propeller::propeller).")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-propeller)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
# The extension is built for one CPython minor version and links the client statically: it
# needs that python3, not the propeller package (the service may run on another host).
if(PROPELLER_PYTHON_VERSION)
  string(REGEX REPLACE "^3\\.([0-9]+)$" "\\1" _minor "${PROPELLER_PYTHON_VERSION}")
  math(EXPR _next "${_minor} + 1")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
      "python3 (>= ${PROPELLER_PYTHON_VERSION}), python3 (<< 3.${_next})")
endif()
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "propeller")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "Propeller client for Python 3
The propeller package: searches as iterators of typed records, live queries, attributes,
indexes and status, through the running Propeller service or mount.")

# Only these components become packages, and only when some install() rule fills them
# (python is empty when the Python module is not built).
get_cmake_property(propeller_components COMPONENTS)
set(CPACK_COMPONENTS_ALL)
foreach(c IN ITEMS propeller dev python)
  if(c IN_LIST propeller_components)
    list(APPEND CPACK_COMPONENTS_ALL ${c})
  endif()
endforeach()
include(CPack)
