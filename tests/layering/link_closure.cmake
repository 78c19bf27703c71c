# Why: a static library links nothing by itself, so a binary's link line
# shows what its libraries declare, not what ends up in it; what a target
# declares is the graph the layers must keep (issue 32). This follows it
# as configured: LINK_LIBRARIES of the target, then INTERFACE_LINK_LIBRARIES
# of each library reached (a static library's PRIVATE links included, as
# $<LINK_ONLY:...>); other generator expressions are left out.

# mixtrain_link_closure(target out_var): every library `target` reaches.
function(mixtrain_link_closure target out_var)
  set(seen)
  set(todo ${target})
  set(property LINK_LIBRARIES)
  while(todo)
    list(POP_FRONT todo current)
    get_target_property(links ${current} ${property})
    set(property INTERFACE_LINK_LIBRARIES)
    if(NOT links)
      continue()
    endif()
    foreach(link IN LISTS links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:([^$<>]*)>$" "\\1" link "${link}")
      if(link MATCHES "[$<>]|^::@" OR link IN_LIST seen)
        continue()
      endif()
      list(APPEND seen ${link})
      if(TARGET ${link})
        list(APPEND todo ${link})
      endif()
    endforeach()
  endwhile()
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

# mixtrain_link_test(name target forbidden): a test that fails, naming
# them, when `target` reaches a library whose name matches the extended
# regular expression `forbidden` (whole names). The closure is written to
# <name>.links in the build tree.
function(mixtrain_link_test name target forbidden)
  mixtrain_link_closure(${target} closure)
  list(JOIN closure "\n" lines)
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${name}.links)
  file(WRITE ${file} "${lines}\n")
  add_test(NAME ${name}
           COMMAND sh -c "found=$(grep -xE \"$1\" \"$0\" | tr '\\n' ' '); if [ -n \"$found\" ]; then echo \"$2 links $found\"; exit 1; fi; echo \"ok: $2 links none of $1\""
                   ${file} ${forbidden} ${target})
endfunction()
