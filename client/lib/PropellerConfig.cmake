# find_package(Propeller) for programs that use libpropeller (docs/install.md, "Using the
# library"): defines the imported target Propeller::propeller, the shared library with its
# include directories (<propeller/propeller_c.h>, <propeller/propeller.h>; the C++ header
# needs C++20, which the target requires of its users).
include("${CMAKE_CURRENT_LIST_DIR}/PropellerTargets.cmake")
