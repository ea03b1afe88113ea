# A stand-in for an Eigen that is too old, used only by the configure-check tests.
if(NOT TARGET Eigen3::Eigen)
  add_library(Eigen3::Eigen INTERFACE IMPORTED)
endif()
