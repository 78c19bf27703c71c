# Builds everything with sanitizers when MIXTRAIN_SANITIZE names them
# ("address,undefined"): the product's e2e tests then run the real
# binaries under AddressSanitizer and UBSan (`make test` builds such a
# copy in build-sanitize/, see the Makefile). Line tables and frame
# pointers make reports name file and line; UBSan stops at its first
# finding, so a report is a failure, not a line in a log.
set(MIXTRAIN_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined")
if(MIXTRAIN_SANITIZE)
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${MIXTRAIN_SANITIZE};-fno-sanitize-recover=all>"
    "$<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer;-g1>")
  add_link_options(-fsanitize=${MIXTRAIN_SANITIZE})
  message(STATUS "mixtrain: sanitizers ${MIXTRAIN_SANITIZE}")
endif()
