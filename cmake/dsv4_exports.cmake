# dsv4_write_version_script(<out> <header>...): a linker version script that exports
# exactly the dsv4_* functions declared in the public headers and hides everything else
# (the families' internal functions stay callable only inside the library and by the tests,
# which link the static internal library).
function(dsv4_write_version_script out)
  set(names "")
  foreach(header ${ARGN})
    file(READ ${header} text)
    string(REGEX MATCHALL "dsv4_[A-Za-z0-9_]+[ \t\r\n]*\\(" calls "${text}")
    foreach(call ${calls})
      string(REGEX REPLACE "[ \t\r\n]*\\($" "" name "${call}")
      list(APPEND names ${name})
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES names)
  list(SORT names)
  set(body "{\n  global:\n")
  foreach(name ${names})
    string(APPEND body "    ${name};\n")
  endforeach()
  string(APPEND body "  local:\n    *;\n};\n")
  file(CONFIGURE OUTPUT ${out} CONTENT "${body}")
endfunction()
