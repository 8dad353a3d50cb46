# The kernel levels of src/kernels/levels_internal.h, the one list of them, as CMake reads it: the
# library builds its kernels once per level (CMakeLists.txt), the program its `attn bench peak`
# loop (cli/CMakeLists.txt).
#   attn_levels_arch(OUT_ARCH): x86_64, aarch64 or other, from CMAKE_SYSTEM_PROCESSOR
#   attn_levels(ARCH OUT_NAMES): the levels ARCH runs whose options the compiler takes, in order;
#     each level's options (a list) in attn_level_options_<name>
include(CheckCCompilerFlag)
set(ATTN_LEVELS_FILE ${CMAKE_CURRENT_LIST_DIR}/../src/kernels/levels_internal.h)

function(attn_levels_arch out)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set(${out} x86_64 PARENT_SCOPE)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
    set(${out} aarch64 PARENT_SCOPE)
  else()
    set(${out} other PARENT_SCOPE)
  endif()
endfunction()

function(attn_levels arch out)
  # the rows: X(constant, name, architecture, "options"), the options without ")"
  file(READ ${ATTN_LEVELS_FILE} text)
  string(REGEX MATCHALL "X\\(ATTN_ISA_[^)]*\\)" rows "${text}")
  set(names "")
  foreach(row IN LISTS rows)
    if(NOT row MATCHES "X\\(ATTN_ISA_[A-Z0-9_]+, ([a-z0-9_]+), ([a-z0-9_]+), \"([^\"]*)\"\\)")
      message(FATAL_ERROR "levels_internal.h: a row CMake cannot read: ${row}")
    endif()
    set(level ${CMAKE_MATCH_1})
    set(level_arch ${CMAKE_MATCH_2})
    separate_arguments(options UNIX_COMMAND "${CMAKE_MATCH_3}")
    if(NOT (level_arch STREQUAL "any" OR level_arch STREQUAL arch))
      continue()
    endif()
    if(options)
      check_c_compiler_flag("${options}" ATTN_COMPILER_TAKES_${level}) # else the level is not built
      if(NOT ATTN_COMPILER_TAKES_${level})
        continue()
      endif()
    endif()
    list(APPEND names ${level})
    set(attn_level_options_${level} "${options}" PARENT_SCOPE)
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()
