// lowbit version. CMake reads the three numbers below; keep them on lines of their own.
#pragma once

#define LOWBIT_VERSION_MAJOR 0
#define LOWBIT_VERSION_MINOR 1
#define LOWBIT_VERSION_PATCH 0

/// The version as one integer, major * 10000 + minor * 100 + patch.
#define LOWBIT_VERSION (LOWBIT_VERSION_MAJOR * 10000 + LOWBIT_VERSION_MINOR * 100 + LOWBIT_VERSION_PATCH)
