# Imported targets for the Debian-packaged dependencies. Several ship no CMake config or
# pkg-config file (METIS, LMDB on Debian 12), so they are found by hand here, once.

find_path(LMDB_INCLUDE_DIR lmdb.h REQUIRED)
find_library(LMDB_LIBRARY lmdb REQUIRED)
add_library(propeller::lmdb INTERFACE IMPORTED)
target_include_directories(propeller::lmdb INTERFACE ${LMDB_INCLUDE_DIR})
target_link_libraries(propeller::lmdb INTERFACE ${LMDB_LIBRARY})

# docs/pitfalls.md METIS-1: Debian's METIS has no pkg-config/CMake config; 32-bit idx_t, float
# real_t.
find_path(METIS_INCLUDE_DIR metis.h REQUIRED)
find_library(METIS_LIBRARY metis REQUIRED)
add_library(propeller::metis INTERFACE IMPORTED)
target_include_directories(propeller::metis INTERFACE ${METIS_INCLUDE_DIR})
target_link_libraries(propeller::metis INTERFACE ${METIS_LIBRARY})

find_path(NANOFLANN_INCLUDE_DIR nanoflann.hpp REQUIRED)
add_library(propeller::nanoflann INTERFACE IMPORTED)
target_include_directories(propeller::nanoflann INTERFACE ${NANOFLANN_INCLUDE_DIR})

# docs/pitfalls.md MP-4: msgpack-c's CMake target pulls Boost; we use the header-only core without
# it.
find_path(MSGPACK_INCLUDE_DIR msgpack.hpp REQUIRED)
add_library(propeller::msgpack INTERFACE IMPORTED)
target_include_directories(propeller::msgpack INTERFACE ${MSGPACK_INCLUDE_DIR})
target_compile_definitions(propeller::msgpack INTERFACE MSGPACK_NO_BOOST)

find_package(PkgConfig REQUIRED)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
pkg_check_modules(FUSE3 REQUIRED IMPORTED_TARGET fuse3)
# The daemons' configuration files (Debian libtomlplusplus-dev: a shared library, whose
# pkg-config file sets TOML_HEADER_ONLY=0) and systemd readiness (libsystemd-dev).
pkg_check_modules(TOMLPLUSPLUS REQUIRED IMPORTED_TARGET tomlplusplus)
pkg_check_modules(LIBSYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
# The opt-in metrics listener (common/daemon/metrics_server.h; Debian libcpp-httplib-dev). Its
# httplib.h only declares: the code is in the shared library, built with OpenSSL, zlib and
# brotli support, so the pkg-config flags (which define CPPHTTPLIB_*_SUPPORT to match the
# library's class layouts) must be used as they are.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
if(PROPELLER_BENCH)
  find_package(SQLite3 REQUIRED)  # the benchmarks' baseline (bench/README.md); nothing else
  find_package(benchmark REQUIRED)
endif()
