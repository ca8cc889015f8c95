# Per-target build settings (docs/style.md rule 11: never global flags).
if(PROPELLER_TESTS)
  find_package(GTest REQUIRED)
endif()
find_package(Threads REQUIRED)

function(propeller_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
  if(PROPELLER_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(PROPELLER_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# propeller_test(NAME SOURCES... [LIBS libs...] [LABELS labels...])
# A GoogleTest binary registered with CTest as one test.
# With PROPELLER_TESTS=OFF (a build of the Python module alone, say: pyproject.toml) the target
# is still declared, so that the target_* calls that follow some tests keep working, but it is
# excluded from the build and from CTest, and GoogleTest is not needed.
function(propeller_test name)
  cmake_parse_arguments(PT "" "TIMEOUT" "LIBS;LABELS" ${ARGN})
  if(NOT PROPELLER_TESTS)
    add_executable(${name} EXCLUDE_FROM_ALL ${PT_UNPARSED_ARGUMENTS})
    return()
  endif()
  add_executable(${name} ${PT_UNPARSED_ARGUMENTS})
  propeller_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${PT_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT PT_TIMEOUT)
    set(PT_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${PT_TIMEOUT})
  if(PT_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${PT_LABELS}")
  endif()
endfunction()
