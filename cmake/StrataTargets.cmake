# Helpers that turn a folder of sources into a layer library, so that adding a file needs no CMake edit.

set(STRATA_WARNINGS -Wall -Wextra)
set(STRATA_SHARED_FIXTURES_DEFAULT "${PROJECT_SOURCE_DIR}/../shared/fixtures")

# strata_layer(NAME DIR [FLAT] [DEPS ...] [INCLUDES ...]): library strata_NAME from DIR/*.cpp
# (recursively unless FLAT), public deps DEPS.
function(strata_layer name dir)
  cmake_parse_arguments(L "FLAT" "" "DEPS;INCLUDES" ${ARGN})
  set(srcs)
  foreach(d ${dir})  # dir may list several folders
    if(L_FLAT)  # these folders only; subfolders are targets of their own
      file(GLOB found CONFIGURE_DEPENDS ${d}/*.cpp)
    else()
      file(GLOB_RECURSE found CONFIGURE_DEPENDS ${d}/*.cpp)
    endif()
    list(APPEND srcs ${found})
  endforeach()
  if(NOT srcs)  # a layer with no code yet still carries its include path and dependencies
    add_library(strata_${name} INTERFACE)
    target_include_directories(strata_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(strata_${name} INTERFACE ${L_DEPS})
    target_include_directories(strata_${name} SYSTEM INTERFACE ${L_INCLUDES})
    return()
  endif()
  add_library(strata_${name} STATIC ${srcs})
  target_include_directories(strata_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(strata_${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${STRATA_WARNINGS}>)
  if(STRATA_NATIVE)
    target_compile_options(strata_${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
  endif()
  target_link_libraries(strata_${name} PUBLIC ${L_DEPS})
  target_include_directories(strata_${name} SYSTEM PUBLIC ${L_INCLUDES})
endfunction()

# strata_test_dir(DIR LIBS...): one GoogleTest executable per test folder, from DIR/*.cpp. A
# folder's tests may be given a ctest COST (strata_test_cost_<name> set before), so that a parallel
# ctest starts the folders that hold the longest tests first instead of ending on them.
function(strata_test_dir dir)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cpp)
  if(NOT srcs)
    return()
  endif()
  string(REPLACE "/" "_" name "${dir}")
  add_executable(test_${name} ${srcs} ${PROJECT_SOURCE_DIR}/tests/test_util.cpp)
  target_compile_options(test_${name} PRIVATE ${STRATA_WARNINGS})
  target_include_directories(test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(test_${name} PRIVATE ${ARGN} GTest::gtest_main GTest::gmock)
  target_compile_definitions(test_${name} PRIVATE
    STRATA_SHARED_FIXTURES_DEFAULT="${STRATA_SHARED_FIXTURES_DEFAULT}"
    STRATA_TEST_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures"
    STRATA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # The processes tests start keep their prefix caches' files in the build tree, not the home.
  set(cost 0)
  if(DEFINED strata_test_cost_${name})
    set(cost ${strata_test_cost_${name}})
  endif()
  gtest_discover_tests(test_${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${name} COST ${cost}
                       ENVIRONMENT "STRATA_DATA_DIR=${PROJECT_BINARY_DIR}/test-data")
endfunction()
