# Install rules: headers, the exported target, the CMake package files, lowbit.pc and lowbit-io.pc.
include(CMakePackageConfigHelpers)

set(LOWBIT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/lowbit" CACHE STRING
    "Where lowbitConfig.cmake is installed, relative to the prefix")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/lowbit" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS lowbit EXPORT lowbitTargets)
install(EXPORT lowbitTargets NAMESPACE lowbit:: DESTINATION "${LOWBIT_INSTALL_CMAKEDIR}")
# lowbit::io in its own file: lowbitConfig.cmake loads it only where the consumer has nlohmann-json.
if(TARGET lowbit_io)
  install(TARGETS lowbit_io EXPORT lowbitIoTargets)
  install(EXPORT lowbitIoTargets NAMESPACE lowbit:: DESTINATION "${LOWBIT_INSTALL_CMAKEDIR}")
endif()
# lowbit::kernels (cmake/lowbitKernels.cmake) likewise, where it is built.
if(TARGET lowbit_kernels)
  install(TARGETS lowbit_kernels EXPORT lowbitKernelsTargets)
  install(EXPORT lowbitKernelsTargets NAMESPACE lowbit:: DESTINATION "${LOWBIT_INSTALL_CMAKEDIR}")
endif()
# lowbit::io_compiled (cmake/lowbitIoCompiled.cmake) likewise; it needs the two exports above.
if(TARGET lowbit_io_compiled)
  install(TARGETS lowbit_io_compiled EXPORT lowbitIoCompiledTargets)
  install(EXPORT lowbitIoCompiledTargets NAMESPACE lowbit:: DESTINATION "${LOWBIT_INSTALL_CMAKEDIR}")
endif()

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/lowbitConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/lowbitConfig.cmake"
  INSTALL_DESTINATION "${LOWBIT_INSTALL_CMAKEDIR}")
# The headers serve every architecture and pointer size; lowbit::kernels, where installed, only the
# instruction set it was compiled for (it carries its -march to its users).
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/lowbitConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion
  ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/lowbitConfig.cmake" "${PROJECT_BINARY_DIR}/lowbitConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/lowbitFindXsimd.cmake"
        DESTINATION "${LOWBIT_INSTALL_CMAKEDIR}")

configure_file("${PROJECT_SOURCE_DIR}/cmake/lowbit.pc.in" "${PROJECT_BINARY_DIR}/lowbit.pc" @ONLY)
configure_file("${PROJECT_SOURCE_DIR}/cmake/lowbit-io.pc.in" "${PROJECT_BINARY_DIR}/lowbit-io.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/lowbit.pc" "${PROJECT_BINARY_DIR}/lowbit-io.pc"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/pkgconfig")
