# How the libraries of the data path (those in libibverbs.so.1) are compiled: the engine and
# the live layer are many small functions across files (a packet's path calls ~40 of them),
# so the shared library is built with link-time optimisation, and their small structures
# (a parsed packet, a work completion) are zeroed by vector stores, not `rep stos`, whose
# start-up costs more than such a store takes (docs/live.md, "How the data path is compiled":
# engine/engine_benchmark BM_PingPong8 per flag). The libraries get GCC's -ffat-lto-objects:
# their archives keep native code too, so the unit tests, benchmarks and tools that link them
# build as before, and only the shared library's link (-flto) optimises across them. Off for
# Debug and the sanitizer and fuzzing builds (their instrumentation is per file) and for
# other compilers.
option(VRNIC_LTO "Link-time optimisation of libibverbs.so.1 (GCC, optimised builds)" ON)
set(VRNIC_DATA_PATH_LIBS vrnic_wire vrnic_engine vrnic_udp vrnic_live_support vrnic_live
                         vrnic_abi_convert vrnic_verbs)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug"
   AND NOT VRNIC_SANITIZE AND NOT VRNIC_TSAN AND NOT VRNIC_FUZZ)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|i.86)$")
    foreach(lib IN LISTS VRNIC_DATA_PATH_LIBS)
      target_compile_options(${lib} PRIVATE
        -mmemset-strategy=vector_loop:512:noalign,libcall:-1:noalign)
    endforeach()
  endif()
  if(VRNIC_LTO)
    foreach(lib IN LISTS VRNIC_DATA_PATH_LIBS)
      target_compile_options(${lib} PRIVATE -flto=auto -ffat-lto-objects)
    endforeach()
    # compat.cc binds its functions to NAME@IBVERBS_1.0 with top-level `.symver` directives,
    # which GCC's LTO drops (abi.Unsupported.private_and_compat_symbols__eopnotsupp).
    set_source_files_properties(src/abi/compat.cc TARGET_DIRECTORY vrnic_verbs
                                PROPERTIES COMPILE_OPTIONS -fno-lto)
    # The engine's benchmark is linked as the library is, so that it measures that code.
    target_link_options(vrnic_verbs PRIVATE -flto=auto)
    if(TARGET engine_benchmark)
      target_link_options(engine_benchmark PRIVATE -flto=auto)
    endif()
  endif()
endif()
