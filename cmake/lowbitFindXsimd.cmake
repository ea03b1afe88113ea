# Finds xsimd 8.1 to 13.x for lowbit; used by the build and by the installed lowbitConfig.cmake.
# Sets lowbit_xsimd_error to a message (empty when all is well) instead of failing, so each caller
# reports it its own way.
#
# xsimd's version files disagree across releases on what "compatible" means (8.x accepts newer,
# later ones only the same major), so ask for any version and check the range here.
#
# Debian 12's xsimd 8.1 exports a target that links a bare "xtl" without finding it, which turns into
# a bogus -lxtl. xsimd only needs xtl for its optional xtl::xcomplex support, which lowbit does not
# use: find xtl if it is there, else stand in an empty target so that link item resolves to nothing.
set(lowbit_xsimd_error "")
if(NOT TARGET xsimd)
  find_package(xsimd QUIET CONFIG)
endif()
if(NOT TARGET xsimd)
  set(lowbit_xsimd_error "lowbit needs xsimd 8.1 or newer (CMake package xsimd, e.g. Debian's libxsimd-dev); it was not found. Set xsimd_DIR or CMAKE_PREFIX_PATH.")
elseif(DEFINED xsimd_VERSION AND xsimd_VERSION VERSION_LESS 8.1)
  set(lowbit_xsimd_error "lowbit needs xsimd 8.1 or newer; found xsimd ${xsimd_VERSION} in ${xsimd_DIR}.")
else()
  get_target_property(lowbit_xsimd_links xsimd INTERFACE_LINK_LIBRARIES)
  if("xtl" IN_LIST lowbit_xsimd_links AND NOT TARGET xtl)
    find_package(xtl QUIET CONFIG)
    if(NOT TARGET xtl)
      add_library(xtl INTERFACE IMPORTED)
    endif()
  endif()
  unset(lowbit_xsimd_links)
endif()
