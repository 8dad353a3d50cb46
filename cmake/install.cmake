# Install: libattn (attn.h) and, when built, libattn_data (attn_data.h) and libattn_plot
# (attn_plot.h); a pkg-config file for each (attn, attn-data, attn-plot) and a CMake package whose
# components they are (find_package(attn COMPONENTS data plot): attn::attn, attn::data,
# attn::plot, shared, and attn::attn_static, attn::data_static, attn::plot_static); with the
# program, bin/attn, its man page and the shipped data (share/attn). The .pc files find their
# prefix relative to themselves, so the install can move (--prefix at install time).
file(RELATIVE_PATH ATTN_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" ATTN_PC_TO_PREFIX "${ATTN_PC_TO_PREFIX}")
# attn.pc's Libs.private: what a static link of the core needs, and nothing else: the GEMM
# library, OpenMP, threads and libm.
set(ATTN_PC_LIBS_PRIVATE "")
foreach(lib ${ATTN_GEMM_LIBRARIES})
  if(lib MATCHES "^-")
    list(APPEND ATTN_PC_LIBS_PRIVATE ${lib})
  else()
    get_filename_component(lib_dir ${lib} DIRECTORY)
    get_filename_component(lib_name ${lib} NAME_WE)
    string(REGEX REPLACE "^lib" "" lib_name ${lib_name})
    if(NOT lib_dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
      list(APPEND ATTN_PC_LIBS_PRIVATE -L${lib_dir})
    endif()
    list(APPEND ATTN_PC_LIBS_PRIVATE -l${lib_name})
  endif()
endforeach()
if(ATTN_OPENMP)
  list(APPEND ATTN_PC_LIBS_PRIVATE ${OpenMP_C_FLAGS})
endif()
list(APPEND ATTN_PC_LIBS_PRIVATE ${CMAKE_THREAD_LIBS_INIT} -lm)
list(REMOVE_DUPLICATES ATTN_PC_LIBS_PRIVATE)
list(JOIN ATTN_PC_LIBS_PRIVATE " " ATTN_PC_LIBS_PRIVATE)

include(CMakePackageConfigHelpers)
set(ATTN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attn)
set_target_properties(attn_shared PROPERTIES EXPORT_NAME attn)
set_target_properties(attn_static PROPERTIES EXPORT_NAME attn_static)
# One library: its targets into an export set of its own (attn<Set>Targets.cmake, read by
# attnConfig.cmake when the component is asked for), its header and its .pc file.
function(attn_install_library targets export_set header pc)
  install(TARGETS ${targets} EXPORT ${export_set}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT ${export_set} NAMESPACE attn:: DESTINATION ${ATTN_CMAKE_DIR})
  install(FILES ${CMAKE_SOURCE_DIR}/include/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  configure_file(${CMAKE_SOURCE_DIR}/${pc}.in ${CMAKE_BINARY_DIR}/${pc} @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/${pc} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()
attn_install_library("attn_static;attn_shared" attnTargets attn.h attn.pc)
if(ATTN_DATA)
  attn_install_library("attn_data_static;attn_data_shared" attnDataTargets attn_data.h attn-data.pc)
endif()
if(ATTN_PLOT)
  attn_install_library("attn_plot_static;attn_plot_shared" attnPlotTargets attn_plot.h attn-plot.pc)
endif()

if(ATTN_PROGRAM)
  install(TARGETS attn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${CMAKE_SOURCE_DIR}/docs/attn.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/data/aclImdb_mini ${CMAKE_SOURCE_DIR}/data/multi30k
          DESTINATION ${CMAKE_INSTALL_DATADIR}/attn)
  install(FILES ${CMAKE_SOURCE_DIR}/data/README.md DESTINATION ${CMAKE_INSTALL_DATADIR}/attn)
endif()

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/attnConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/attnConfig.cmake INSTALL_DESTINATION ${ATTN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/attnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/attnConfig.cmake ${CMAKE_BINARY_DIR}/attnConfigVersion.cmake
        DESTINATION ${ATTN_CMAKE_DIR})
