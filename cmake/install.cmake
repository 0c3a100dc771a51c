# What a vrnic installation holds (the Debian package installs exactly this: debian/rules),
# and the target that builds it: cmake --build ... --target vrnic_runtime.
#   bin/vrnic
#   lib/<triplet>/vrnic/libibverbs.so.1, librdmacm.so.1   private: never rdma-core's own
#   lib/<triplet>/vrnic/vrnic-guard   the CM guard the library starts (src/guard)
#   share/vrnic/demo.py, sim-plots.py, scenarios/*.json
#   share/man/man1/vrnic.1, vrnic-run.1; share/bash-completion/completions/vrnic
add_custom_target(vrnic_runtime)
add_dependencies(vrnic_runtime vrnic vrnic_verbs vrnic_rdmacm vrnic-guard)

install(TARGETS vrnic RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The libraries go where only `vrnic run` points programs (LD_LIBRARY_PATH); no development
# symlink (libibverbs.so): nothing links against them, programs link against rdma-core's.
install(TARGETS vrnic_verbs vrnic_rdmacm
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/vrnic NAMELINK_SKIP)
install(TARGETS vrnic-guard RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR}/vrnic)

set(tools ${CMAKE_SOURCE_DIR}/src/tools)
install(FILES ${tools}/demo.py DESTINATION ${CMAKE_INSTALL_DATADIR}/vrnic)
install(FILES ${tools}/sim_plots.py DESTINATION ${CMAKE_INSTALL_DATADIR}/vrnic
        RENAME sim-plots.py)
# The simulator's scenarios are built into vrnic (`vrnic sim list`); the files are there to be
# copied and changed (`vrnic sim run FILE`).
install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/sim/scenarios/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/vrnic/scenarios FILES_MATCHING PATTERN "*.json")
install(FILES ${tools}/man/vrnic.1 ${tools}/man/vrnic-run.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${tools}/vrnic.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME vrnic)
unset(tools)
