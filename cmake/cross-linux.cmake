# A toolchain file for another Linux architecture, with Debian's cross compilers and multiarch
# libraries (dpkg --add-architecture ARCH; apt-get install gcc-TRIPLE libopenblas-dev:ARCH):
#   ATTN_CROSS=aarch64-linux-gnu cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/cross-linux.cmake \
#     -DATTN_GEMM=openblas ...
# The triple comes from the environment (try_compile reads this file again, with the
# environment but not the cache). ctest runs the tests through qemu-user (CMAKE_CROSSCOMPILING_EMULATOR)
# with the target's libraries (-L /usr/TRIPLE): scripts/cross_test.sh does all of it.
if(NOT DEFINED ENV{ATTN_CROSS})
  message(FATAL_ERROR "cross-linux.cmake: set ATTN_CROSS to the target's triple, e.g. aarch64-linux-gnu")
endif()
set(triple $ENV{ATTN_CROSS})
set(CMAKE_SYSTEM_NAME Linux)
string(REGEX REPLACE "-.*" "" CMAKE_SYSTEM_PROCESSOR "${triple}")
set(CMAKE_C_COMPILER ${triple}-gcc)
set(CMAKE_CXX_COMPILER ${triple}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${triple})
set(CMAKE_FIND_ROOT_PATH /usr/${triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-${CMAKE_SYSTEM_PROCESSOR};-L;/usr/${triple})
