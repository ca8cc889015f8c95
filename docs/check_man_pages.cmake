# Renders every man page with groff (-ww: all warnings) and fails on any output on stderr or
# a page without its NAME section. Run by CTest (docs/CMakeLists.txt).
foreach(page IN LISTS PAGES)
  execute_process(COMMAND ${GROFF} -man -Tutf8 -ww ${page}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE warnings)
  if(NOT rc EQUAL 0 OR NOT warnings STREQUAL "")
    message(FATAL_ERROR "${page}: groff exit ${rc}: ${warnings}")
  endif()
  file(READ ${page} source)
  if(NOT source MATCHES "\n\\.SH NAME\n" OR text STREQUAL "")
    message(FATAL_ERROR "${page}: empty, or no NAME section")
  endif()
endforeach()
list(LENGTH PAGES n)
message(STATUS "${n} man pages render without warnings")
