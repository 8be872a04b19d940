/* A DLPack user that adopts Tack: the upstream header first, then Tack's.
 * Compiled as C11 and as C++17 by headers.py, warnings as errors. */
#include <dlpack/dlpack.h>
#include <tack/tack.h>

#include "uses.h"
