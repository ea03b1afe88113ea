# A stand-in for an xsimd that is too old, used only by the configure-check tests.
if(NOT TARGET xsimd)
  add_library(xsimd INTERFACE IMPORTED)
endif()
